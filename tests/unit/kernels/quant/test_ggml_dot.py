"""kernels/quant/ggml_dot.py: Q4_1 / Q5_0 / Q5_1 / Q8_0 x Q8_0/Q8_1 in llama.cpp's order.

Reference: per output value, 8 lanes of exact integer sums of 4 products (values from
gguf-py's dequantization: (w - m) / d), acc = fma(d_w * d_x, isum, acc), summs =
fma(m, s, summs), hsum_float_8(acc) + summs (tests/unit/kernels/_ggml_ref.py)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from onnxexec.kernels import isa
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.ggml_dot import BLOCK_TYPES, ggml_dot
from tests.unit.kernels import _ggml_ref as ref
from tests.unit.kernels._qblocks import random_blocks, reference_dequant


def _reference(raw, t, n, k, xq, xst):
    size = BLOCK_TYPES[t][1]
    blk = raw.reshape(n, k // 32, size)
    d = ref.half(blk[..., 0:2])
    has_m = t in (q.Q4_1, q.Q5_1)
    m = ref.half(blk[..., 2:4]) if has_m else np.zeros_like(d)
    deq = reference_dequant(raw, t).reshape(n, k // 32, 32)
    vals = np.rint((deq - m[..., None]) / d[..., None]).astype(np.int64)
    xi = xq.astype(np.int64).reshape(xq.shape[0], k // 32, 32)
    out = np.empty((xq.shape[0], n), np.float32)
    for ti in range(xq.shape[0]):
        for r in range(n):
            acc = np.zeros(8, np.float32)
            summs = np.float32(0)
            for b in range(k // 32):
                lanes = (vals[r, b] * xi[ti, b]).reshape(8, 4).sum(1).astype(np.float32)
                acc = ref.fma(ref.f32(d[r, b] * xst[ti, 0, b]), lanes, acc)
                if has_m:
                    summs = ref.fma(m[r, b], xst[ti, 1, b], summs)
            out[ti, r] = ref.f32(ref.hsum8(acc) + summs)
    return out


@pytest.mark.parametrize("t", sorted(BLOCK_TYPES), ids=lambda t: q.type_name(t))
@pytest.mark.parametrize("rows", [1, 3])
def test_matches_reference(t, rows):
    rng = np.random.default_rng(t + 10 * rows)
    n, k = 5, 128
    raw = random_blocks(t, n * k // 32, rng)
    blk = raw.reshape(n * k // 32, -1)
    blk[:, 0:2] = np.where(blk[:, 0:2] == 0, 1, blk[:, 0:2])  # d != 0: values recoverable
    x = rng.standard_normal((rows, k)).astype(np.float32)
    xq, xst = quantize_act(x)
    out = np.empty((rows, n), np.float32)
    ggml_dot(raw, raw.size // n, t, xq, xst, out)
    np.testing.assert_array_equal(out, _reference(raw, t, n, k, xq, xst))


@pytest.mark.skipif(
    numba.config.DISABLE_JIT,
    reason="qmv_exact's FMAs come from fastmath 'contract', which plain Python does not apply",
)
@pytest.mark.parametrize("t", sorted(BLOCK_TYPES), ids=lambda t: q.type_name(t))
def test_qmatmul_int8_path_equals_dot_blocks(t):
    """qmatmul's int8 path for these types (lanes layout, qmv_exact) sums in this order."""
    from onnxexec.kernels.quant.qmatmul import prepare_weight, qmatmul

    rng = np.random.default_rng(7 + t)
    n, k = 70, 96  # more rows than one lanes group
    raw = random_blocks(t, n * k // 32, rng)
    x = rng.standard_normal((3, k)).astype(np.float32)
    xq, xst = quantize_act(x)
    want = np.empty((3, n), np.float32)
    ggml_dot(raw, raw.size // n, t, xq, xst, want)
    got = qmatmul(x, prepare_weight(raw, t, (n, k)), mode="int8")
    if isa.has("fma"):
        np.testing.assert_array_equal(got, want)
    else:  # ONNXEXEC_ISA=generic: no FMA to contract into, so mul + add rounds twice
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
