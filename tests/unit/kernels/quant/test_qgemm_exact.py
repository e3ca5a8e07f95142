"""The prompt-size (tiled) exact kernels: qgemm_exact.py (Q4_1 / Q5_0 / Q5_1 / Q8_0) and
qgemm_exact_k.py's numba GEMMs (Q4_K / Q6_K) give llama.cpp's bits.

References: test_qmv_exact's per-output ggml_vec_dot order written out in numpy, and
ggml_dot_k.dot_k (the readable form of llama.cpp's K-quant orders) through qmatmul.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels import isa
from onnxexec.kernels.quant import qmatmul as qm
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.dequant import block_geometry
from onnxexec.kernels.quant.ggml_dot_k import ggml_dot_k
from onnxexec.kernels.quant.qgemm_exact import GEMM_EXACT, GEMM_MIN_T, TILE_T, gemm_exact
from tests.unit.kernels.quant.test_qmv_exact import TYPES, _args, _blocks, _reference


def _same_bits(got, want):
    """Bit-identical with llama.cpp's order where FMA exists (the kernels' fastmath
    'contract' fuses into it); at ONNXEXEC_ISA=generic (no FMA) mul + add round twice,
    so the portable path is held to 1e-5 of the largest output instead (K-long sums:
    each rounding is relative to the partial sums, not to the one output)."""
    if isa.has("fma"):
        np.testing.assert_array_equal(
            np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32)
        )
    else:
        w = np.asarray(want)
        scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=1.0))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32)


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("t_rows", [GEMM_MIN_T, TILE_T + 1, 2 * TILE_T + 3])
def test_gemm_exact_matches_ggml_order(t, t_rows):
    """Odd tiles, a partial last row group (70 = 64 + 6 rows), serial and parallel."""
    rng = np.random.default_rng(t * 1000 + t_rows)
    n, k = 70, 96
    raw = _blocks(t, n, k, rng)
    x = (rng.standard_normal((t_rows, k)) * 2).astype(np.float32)
    xq, xst = quantize_act(x)
    want = _reference(raw, t, n, k, xq, xst)
    args = _args(raw, t, n, k)
    layout = "q8_0" if t == q.Q8_0 else "nib"
    out = np.full((t_rows, n), np.nan, np.float32)
    gemm_exact(args, layout, xq, xst, out)
    _same_bits(out, want)
    if t != q.Q8_0:  # the parallel twin with more chunks than work items
        out2 = np.full((t_rows, n), np.nan, np.float32)
        qs, qh, fsc, _, _, off = args
        GEMM_EXACT[0](qs, qh, fsc, off, xq.astype(np.float32), xst, out2, 64)
        _same_bits(out2, want)


def test_gemm_exact_extreme_values():
    """All weight values at their largest magnitude and activations of one sign: the
    float32 lane sums must still be exact (4 * 31 * 127 << 2^24)."""
    rng = np.random.default_rng(3)
    n, k, t_rows = 64, 128, 12
    for t in TYPES:
        raw = _blocks(t, n, k, rng)
        size = block_geometry(t)[1]
        blocks = raw.reshape(-1, size)
        blocks[:, size - 16 if t != q.Q8_0 else 2 :] = 0xFF if t != q.Q8_0 else 0x81
        if t in (q.Q5_0, q.Q5_1):
            o = 2 if t == q.Q5_0 else 4
            blocks[:, o : o + 4] = 0xFF
        x = np.full((t_rows, k), 3.0, np.float32)
        xq, xst = quantize_act(x)
        want = _reference(raw, t, n, k, xq, xst)
        out = np.empty((t_rows, n), np.float32)
        gemm_exact(_args(raw, t, n, k), "q8_0" if t == q.Q8_0 else "nib", xq, xst, out)
        _same_bits(out, want)


def _k_weight(t: int, n: int, k: int, rng, extreme: bool = False) -> np.ndarray:
    block, size = block_geometry(t)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    half = rng.integers(0x2000, 0x3000, (raw.shape[0], 2), dtype=np.uint16).view(np.uint8)
    if t == q.Q4_K:
        raw[:, 0:4] = half.reshape(-1, 4)
        if extreme:  # 6-bit scales and mins at 63, every nibble 15
            raw[:, 4:16] = 0xFF
            raw[:, 16:144] = 0xFF
    else:
        raw[:, 208:210] = half[:, :2]
        if extreme:  # every value 0 (q - 32 = -32), scales -128
            raw[:, 0:192] = 0
            raw[:, 192:208] = 0x80
    return raw.reshape(-1)


@pytest.mark.parametrize("t", [q.Q4_K, q.Q6_K])
@pytest.mark.parametrize("t_rows", [8, 19, 2 * TILE_T + 4])
@pytest.mark.parametrize("extreme", [False, True])
def test_k_tiles_equal_ggml_dot_k(t, t_rows, extreme, monkeypatch):
    """qmatmul's tiled K-quant path (rows >= 8; Q4_K's last T % 4 rows in the gemv
    order) == ggml_dot_k; extreme blocks check the float32 exactness bounds."""
    rng = np.random.default_rng(t * 10 + t_rows)
    n, k = 136, 512
    raw = _k_weight(t, n, k, rng, extreme)
    monkeypatch.setattr(qm, "simd_ok", lambda *_: False)  # the lanes layout, not AVX2 bytes
    w = qm.prepare_weight(raw, t, (n, k))
    assert w.layout != "raw"
    x = (rng.standard_normal((t_rows, k)) * 2).astype(np.float32)
    if extreme:
        x = np.abs(x) + 1.0  # one sign: the sums reach their bounds
    want = ggml_dot_k(raw, raw.size // n, t, x, np.empty((t_rows, n), np.float32))
    got = qm.qmatmul(x, w, mode="int8")
    _same_bits(got, want)
