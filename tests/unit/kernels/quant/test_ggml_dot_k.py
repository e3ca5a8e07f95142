"""kernels/quant/ggml_dot_k.py: K-quant x Q8_K products in llama.cpp's order (x86 AVX2).

The reference (tests/unit/kernels/_ggml_ref.py) decodes the super-blocks with numpy
and writes the three orders out per output value: vec_dot (8 integer lanes), the
repacked Q4_K gemv/gemm and ggml-cpu/tiled (>= 8 activation rows).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_dot_k import K_TYPES, ggml_dot_k, quantize_q8_k
from tests.unit.kernels import _ggml_ref as ref
from tests.unit.kernels._qblocks import random_blocks, reference_dequant


def _reference(raw: np.ndarray, t: int, n: int, k: int, x: np.ndarray) -> np.ndarray:
    size = K_TYPES[t][1]
    nsb = k // 256
    vals, sc, mn, d, dmin = ref.decode_k(raw.reshape(n * nsb, size), t)
    xq, xd, bs = ref.quantize_q8_k(x)
    rows = x.shape[0]
    rows4 = rows - rows % 4 if (t == q.Q4_K and n % 8 == 0) else 0
    if t == q.Q4_K and n % 8 == 0:
        mode = "repack"
    elif rows >= 8:
        mode = "tiled"
    else:
        mode = "vec"
    out = np.empty((rows, n), np.float32)
    for ti in range(rows):
        for r in range(n):
            acc = np.zeros(8, np.float32)
            accm = np.zeros(4, np.float32)
            summs = np.float32(0)
            for i in range(nsb):
                sb = r * nsb + i
                v = vals[sb] - 32 if t == q.Q6_K else vals[sb]
                xs = xq[ti, 256 * i : 256 * i + 256]
                prod = np.repeat(sc[sb], 16) * v * xs
                b16 = bs[ti, 16 * i : 16 * i + 16]
                yd = xd[ti, i]
                if mode == "tiled":
                    res = ref.f32(d[sb] * np.float32(prod.sum()))
                    if t in (q.Q2_K, q.Q4_K, q.Q5_K):
                        res = ref.fma(-dmin[sb], np.float32((mn[sb] * b16).sum()), res)
                    acc[0] = ref.fma(res, yd, acc[0])
                    continue
                if mode == "repack":
                    step = 64 if ti < rows4 else 256
                    for p0 in range(0, 256, step):
                        tot = prod[p0 : p0 + step].sum()
                        tmin = (mn[sb] * b16)[p0 // 16 : (p0 + step) // 16].sum()
                        acc[0] = ref.fma(np.float32(tot), ref.f32(d[sb] * yd), acc[0])
                        accm[0] = ref.fma(np.float32(tmin), ref.f32(dmin[sb] * yd), accm[0])
                    continue
                dd, dm = ref.f32(yd * d[sb]), ref.f32(-yd * dmin[sb])
                lanes = prod.reshape(8, 8, 4).sum((0, 2))  # lane = (p % 32) // 4
                if t == q.Q6_K:  # unsigned values; the offset leaves lane l through bsums
                    u = np.repeat(sc[sb], 16) * vals[sb] * xs
                    lanes = u.reshape(8, 8, 4).sum((0, 2)) - 32 * (sc[sb] * b16).reshape(8, 2).sum(
                        1
                    )
                if t == q.Q2_K:
                    acc = ref.fma(dm, (mn[sb] * b16).reshape(8, 2).sum(1).astype(np.float32), acc)
                if t == q.Q4_K:
                    accm = ref.fma(dm, _pairs(mn[sb], b16).astype(np.float32), accm)
                if t == q.Q5_K:
                    summs = ref.fma(dm, np.float32(_pairs(mn[sb], b16).sum()), summs)
                acc = ref.fma(dd, lanes.astype(np.float32), acc)
            if mode == "tiled":
                out[ti, r] = acc[0]
            elif mode == "repack":
                out[ti, r] = ref.f32(acc[0] - accm[0])
            else:
                h = ref.hsum8(acc)
                if t == q.Q4_K:
                    h = ref.f32(
                        h + ref.f32(ref.f32(accm[0] + accm[2]) + ref.f32(accm[1] + accm[3]))
                    )
                elif t == q.Q5_K:
                    h = ref.f32(h + summs)
                out[ti, r] = h
    return out


def _pairs(mn16: np.ndarray, b16: np.ndarray) -> np.ndarray:
    """Q4_K / Q5_K min products per pair of 32-value sub-blocks (madd of mins, q8s)."""
    s32 = b16.reshape(8, 2).sum(1)
    m32 = mn16[0::2]
    return (m32 * s32).reshape(4, 2).sum(1)


@pytest.mark.parametrize("t", sorted(K_TYPES), ids=lambda t: q.type_name(t))
@pytest.mark.parametrize("rows", [1, 5, 9])
@pytest.mark.parametrize("n", [8, 12])
def test_matches_reference(t, rows, n):
    rng = np.random.default_rng(t * 100 + rows + n)
    k = 512
    raw = random_blocks(t, n * k // 256, rng)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    out = np.empty((rows, n), np.float32)
    ggml_dot_k(raw, raw.size // n, t, x, out)
    np.testing.assert_array_equal(out, _reference(raw, t, n, k, x))
    # and it is the product with the dequantized weights, up to rounding
    xq, xd, _ = ref.quantize_q8_k(x)
    xdeq = (xq.reshape(rows, -1, 256) * xd[..., None]).reshape(rows, k)
    w = reference_dequant(raw, t).reshape(n, k).astype(np.float64)
    np.testing.assert_allclose(out, xdeq @ w.T, rtol=1e-4, atol=1e-4 * np.abs(xdeq @ w.T).max())


def test_quantize_q8_k_matches_reference():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 512)).astype(np.float32)
    x[1, :256] = 0.0  # an all-zero block: d = 0, q = 0
    x[2, 5], x[2, 9] = -4.0, 4.0  # |max| tie: the first one sets the sign
    qs, d, bs = quantize_q8_k(x)
    rq, rd, rbs = ref.quantize_q8_k(x)
    np.testing.assert_array_equal(qs, rq)
    np.testing.assert_array_equal(d, rd)
    np.testing.assert_array_equal(bs, rbs)
    qs4, _, _ = quantize_q8_k(x, 3)  # repack's 4-row quantizer: +amax wins the tie
    assert qs4[2, 9] == -127 and qs[2, 5] == -127
