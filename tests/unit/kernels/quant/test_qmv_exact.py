"""kernels/quant/qmv_exact.py: ggml's summation order for Q4_1 / Q5_0 / Q5_1 / Q8_0.

Reference: the dot products written out per output value with gguf-py's dequantized
integer values and float64-emulated FMAs (exact product, one float32 rounding of the
sum; a true FMA differs only when that double rounding hits a tie, which these
seeded blocks do not). Plus equality with ggml_dot's kernels where they exist, and
with fuse_rows'ed weights (tests/unit/kernels/quant/test_qfuse.py covers the lanes types).
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from onnxexec.kernels import isa
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.qlayout import nib_layout, q8_0_layout
from onnxexec.kernels.quant.qmv_exact import EXACT_KERNELS

TYPES = {q.Q4_1: "Q4_1", q.Q5_0: "Q5_0", q.Q5_1: "Q5_1", q.Q8_0: "Q8_0"}


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


def _f32(x: float) -> np.float32:
    return np.float32(x)


def _fma(a, b, c) -> np.float32:
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


def _reference(raw: np.ndarray, t: int, n: int, k: int, xq, xst) -> np.ndarray:
    """ggml_vec_dot_* per output, from the blocks' integer values (gguf-py decodes them)."""
    qtype = gguf.GGMLQuantizationType[TYPES[t]]
    blocks = raw.reshape(n * k // 32, -1)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32).reshape(n, k // 32)
    has_m = t in (q.Q4_1, q.Q5_1)
    m = (
        blocks[:, 2:4].copy().view(np.float16).astype(np.float32).reshape(n, k // 32)
        if has_m
        else np.zeros_like(d)
    )
    deq = gguf.quants.dequantize(raw.reshape(n, -1), qtype).reshape(n, k // 32, 32)
    # the integer values: (w - m) / d, exact for these formats (d != 0 in the test data)
    vals = np.rint((deq - m[..., None]) / d[..., None]).astype(np.int64)
    out = np.empty((xq.shape[0], n), np.float32)
    for ti in range(xq.shape[0]):
        xi = xq[ti].astype(np.int64).reshape(k // 32, 32)
        for r in range(n):
            acc = [np.float32(0.0)] * 8
            summs = np.float32(0.0)
            for b in range(k // 32):
                db = _f32(d[r, b] * xst[ti, 0, b])
                for lane in range(8):
                    isum = int(
                        np.dot(vals[r, b, 4 * lane : 4 * lane + 4], xi[b, 4 * lane : 4 * lane + 4])
                    )
                    acc[lane] = _fma(db, np.float32(isum), acc[lane])
                if has_m:
                    summs = _fma(m[r, b], xst[ti, 1, b], summs)
            a = [np.float32(acc[i + 4] + acc[i]) for i in range(4)]
            out[ti, r] = np.float32(
                np.float32(np.float32(a[0] + a[2]) + np.float32(a[1] + a[3])) + summs
            )
    return out


def _blocks(t: int, n: int, k: int, rng) -> np.ndarray:
    size = {q.Q4_1: q.Q4_1_BYTES, q.Q5_0: q.Q5_0_BYTES, q.Q5_1: q.Q5_1_BYTES, q.Q8_0: q.Q8_0_BYTES}[
        t
    ]
    raw = rng.integers(0, 256, (n * k // 32, size), dtype=np.uint8)
    halves = rng.integers(0x2000, 0x3400, (raw.shape[0], 2), dtype=np.uint16)
    raw[:, 0:2] = halves[:, :1].view(np.uint8).reshape(-1, 2)
    if t in (q.Q4_1, q.Q5_1):
        raw[:, 2:4] = halves[:, 1:].view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)


def _args(raw, t, n, k):
    if t == q.Q8_0:
        a = q8_0_layout(raw, n, k)
        return (a["qs"], a["d"])
    a = nib_layout(raw, t, n, k)
    return (a["qs"], a["qh"], a["fsc"], a["usc"], a["kind"], a["off"])


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("n,k,t_rows", [(70, 64, 1), (64, 96, 3)])
def test_exact_kernels_match_ggml_order(t, n, k, t_rows):
    rng = np.random.default_rng(t * 100 + n)
    raw = _blocks(t, n, k, rng)
    x = (rng.standard_normal((t_rows, k)) * 2).astype(np.float32)
    xq, xst = quantize_act(x)
    want = _reference(raw, t, n, k, xq, xst)
    args = _args(raw, t, n, k)
    for kern, chunks in ((EXACT_KERNELS[t][1], 1), (EXACT_KERNELS[t][0], 16)):
        out = np.empty((t_rows, n), np.float32)
        kern(*args, xq, xst, out, chunks)
        _same_bits(out, want)


def test_exact_kernels_equal_ggml_dot_kernels():
    ggml_dot = pytest.importorskip("onnxexec.kernels.quant.ggml_dot")
    pairs = {q.Q4_1: "DOT_NIB", q.Q5_0: "DOT_NIB", q.Q5_1: "DOT_NIB", q.Q8_0: "DOT_Q8"}
    if not all(hasattr(ggml_dot, name) for name in pairs.values()):
        pytest.skip("ggml_dot has no lanes kernels")
    rng = np.random.default_rng(7)
    for t, name in pairs.items():
        raw = _blocks(t, 200, 576, rng)
        x = (rng.standard_normal((2, 576)) * 3).astype(np.float32)
        xq, xst = quantize_act(x)
        args = _args(raw, t, 200, 576)
        a, b = np.empty((2, 200), np.float32), np.empty((2, 200), np.float32)
        EXACT_KERNELS[t][1](*args, xq, xst, a, 1)
        getattr(ggml_dot, name)[1](*args, xq, xst, b, 1)
        _same_bits(a, b)


@pytest.mark.parametrize("t_rows", [1, 3, 5, 8, 13, 40])
@pytest.mark.parametrize("t", [q.Q4_K, q.Q6_K])
def test_k_exact_lanes_equal_ggml_dot_k(t, t_rows, monkeypatch):
    """qmv_exact_k's lanes kernels == ggml_dot_k.dot_k (the readable reference of
    llama.cpp's K-quant order) for every activation-row regime (gemv, gemm, tiled)."""
    from onnxexec.kernels.quant import qmatmul as qm
    from onnxexec.kernels.quant.dequant import block_geometry
    from onnxexec.kernels.quant.ggml_dot_k import ggml_dot_k

    rng = np.random.default_rng(t * 10 + t_rows)
    n, k = 136, 512
    block, size = block_geometry(t)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    half = rng.integers(0x2000, 0x3000, (raw.shape[0], 2), dtype=np.uint16).view(np.uint8)
    if t == q.Q4_K:
        raw[:, 0:4] = half.reshape(-1, 4)
    else:
        raw[:, 208:210] = half[:, :2]
    raw = raw.reshape(-1)
    monkeypatch.setattr(qm, "simd_ok", lambda *_: False)  # the lanes layout, not AVX2 bytes
    w = qm.prepare_weight(raw, t, (n, k))
    assert w.layout != "raw"
    x = (rng.standard_normal((t_rows, k)) * 2).astype(np.float32)
    want = ggml_dot_k(raw, raw.size // n, t, x, np.empty((t_rows, n), np.float32))
    got = qm.qmatmul(x, w, mode="int8")
    _same_bits(got, want)
    if t_rows >= 8:  # the BLAS path too, whatever the size thresholds say
        from onnxexec.kernels.quant import qmv_exact_k

        for name in ("GEMM_MIN_T_Q4K", "GEMM_MIN_T_Q6K"):
            monkeypatch.setattr(qmv_exact_k, name, 8)
        got = qm.qmatmul(x, w, mode="int8")
        _same_bits(got, want)
