"""Lanes kernels with llama.cpp's summation order for Q4_1, Q5_0, Q5_1 and Q8_0.

The arithmetic is ggml_dot.dot_blocks' (ggml_vec_dot_q*_q8_* on AVX2 + FMA): per
output value 8 float32 lanes acc[l], lane l taking the exact integer sum of the 4
products of block values 4l..4l+3; per block acc[l] = fma(d, float(isum_l), acc[l])
with d = f32(w.d * x.d); the *_1 types add summs = fma(w.m, x.s, summs) in block
order; result = hsum_float_8(acc) + summs, hsum = ((a0+a2)+(a1+a3)), a_i = acc[i+4] +
acc[i]. The fused multiply-adds are real FMAs (fastmath "contract" on `a + b * c`
only; every other operation is a separately rounded float32 step), as
_mm256_fmadd_ps is.

What differs is the layout: the weights are the lanes arrays of qlayout.py (64 rows
side by side, see qmv_nib.py / qmv_q8.py), so the inner loops run over rows with
unit stride, in int16 SIMD lanes: 4 products of at most 16 * 127 (Q4 / Q5) fit, and
for Q8_0 pairs of products (128 * 127) are summed in int16 and widened to int32.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.math.lanes import twins
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.qtypes import QK


@nb.njit(cache=True, nogil=True, inline="always")
def q5(byte, h0, h1, j, sub):
    """Values j and j + 16 of a Q5 block (nibbles of `byte`, fifth bits from the bit
    planes h0 / h1), minus `sub`, as int16 (numpy ufuncs keep numba in int16)."""
    v = np.int16(byte)
    sh = np.int16(j)
    one = np.int16(1)
    four = np.int16(4)
    bl = np.bitwise_and(np.right_shift(h0, sh), one)
    bh = np.bitwise_and(np.right_shift(h1, sh), one)
    lo = np.int16(np.int16((v & 15) | np.left_shift(bl, four)) - sub)
    hi = np.int16(np.int16((v >> 4) | np.left_shift(bh, four)) - sub)
    return lo, hi


def _qmv_exact_nib(qs, qh, fsc, usc, kind, off, xq, xst, out, n_chunks):
    """out (T, N) = W . x for Q4_1 / Q5_0 / Q5_1 lanes weights (qmv_nib's arrays; usc
    unused), x given as quantize_act(x) = (xq, xst). kind MIN (*_1: d, m in fsc) or
    SYM (Q5_0, values - off)."""
    ng, n_blocks, _, G = qs.shape
    T = xq.shape[0]
    N = out.shape[1]
    has_qh = qh.shape[0] > 0
    sub = np.int16(off)
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):  # each chunk owns whole groups = whole rows of out
        s = np.empty((8, G), np.int16)
        acc = np.empty((8, G), np.float32)
        summs = np.empty(G, np.float32)
        dv = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                acc[:] = 0.0
                summs[:] = 0.0
                for b in range(n_blocks):
                    xo = b * QK
                    for lq in range(4):
                        j = 4 * lq
                        x0 = xq[t, xo + j]
                        x1 = xq[t, xo + j + 1]
                        x2 = xq[t, xo + j + 2]
                        x3 = xq[t, xo + j + 3]
                        y0 = xq[t, xo + 16 + j]
                        y1 = xq[t, xo + 17 + j]
                        y2 = xq[t, xo + 18 + j]
                        y3 = xq[t, xo + 19 + j]
                        if has_qh:
                            for ln in range(G):
                                h0 = qh[g, b, 0, ln]
                                h1 = qh[g, b, 1, ln]
                                l0, u0 = q5(qs[g, b, j, ln], h0, h1, j, sub)
                                l1, u1 = q5(qs[g, b, j + 1, ln], h0, h1, j + 1, sub)
                                l2, u2 = q5(qs[g, b, j + 2, ln], h0, h1, j + 2, sub)
                                l3, u3 = q5(qs[g, b, j + 3, ln], h0, h1, j + 3, sub)
                                s[lq, ln] = np.int16(l0 * x0 + l1 * x1 + l2 * x2 + l3 * x3)
                                s[lq + 4, ln] = np.int16(u0 * y0 + u1 * y1 + u2 * y2 + u3 * y3)
                        else:
                            for ln in range(G):
                                v0 = np.int16(qs[g, b, j, ln])
                                v1 = np.int16(qs[g, b, j + 1, ln])
                                v2 = np.int16(qs[g, b, j + 2, ln])
                                v3 = np.int16(qs[g, b, j + 3, ln])
                                s[lq, ln] = np.int16(
                                    np.int16(v0 & 15) * x0
                                    + np.int16(v1 & 15) * x1
                                    + np.int16(v2 & 15) * x2
                                    + np.int16(v3 & 15) * x3
                                )
                                s[lq + 4, ln] = np.int16(
                                    np.int16(v0 >> 4) * y0
                                    + np.int16(v1 >> 4) * y1
                                    + np.int16(v2 >> 4) * y2
                                    + np.int16(v3 >> 4) * y3
                                )
                    xd = xst[t, 0, b]
                    for ln in range(G):
                        dv[ln] = np.float32(fsc[g, b, 0, ln] * xd)
                    for lane in range(8):
                        for ln in range(G):
                            acc[lane, ln] = acc[lane, ln] + dv[ln] * np.float32(s[lane, ln])
                    if fsc.shape[2] > 1:
                        xs = xst[t, 1, b]
                        for ln in range(G):
                            summs[ln] = summs[ln] + fsc[g, b, 1, ln] * xs
                _hsum_store(acc, summs, out, t, n0, nv)


@nb.njit(cache=True, nogil=True, inline="always")
def _hsum_store(acc, summs, out, t, n0, nv):
    """out[t, n0 + ln] = hsum_float_8(acc[:, ln]) + summs[ln] for ln < nv."""
    for ln in range(nv):
        a0 = np.float32(acc[4, ln] + acc[0, ln])
        a1 = np.float32(acc[5, ln] + acc[1, ln])
        a2 = np.float32(acc[6, ln] + acc[2, ln])
        a3 = np.float32(acc[7, ln] + acc[3, ln])
        r = np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))
        out[t, n0 + ln] = np.float32(r + summs[ln])


def _qmv_exact_q8(qs, d, xq, xst, out, n_chunks):
    """out (T, N) = W . x for Q8_0 lanes weights (qmv_q8's arrays), x as quantize_act."""
    ng, n_blocks, _, G = qs.shape
    T = xq.shape[0]
    N = out.shape[1]
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):
        s = np.empty((8, G), np.int32)
        acc = np.empty((8, G), np.float32)
        summs = np.zeros(G, np.float32)
        dv = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                acc[:] = 0.0
                for b in range(n_blocks):
                    xo = b * QK
                    for lane in range(8):
                        j = 4 * lane
                        x0 = xq[t, xo + j]
                        x1 = xq[t, xo + j + 1]
                        x2 = xq[t, xo + j + 2]
                        x3 = xq[t, xo + j + 3]
                        for ln in range(G):
                            p = np.int16(
                                np.int16(qs[g, b, j, ln]) * x0 + np.int16(qs[g, b, j + 1, ln]) * x1
                            )
                            r = np.int16(
                                np.int16(qs[g, b, j + 2, ln]) * x2
                                + np.int16(qs[g, b, j + 3, ln]) * x3
                            )
                            s[lane, ln] = np.int32(p) + np.int32(r)
                    xd = xst[t, 0, b]
                    for ln in range(G):
                        dv[ln] = np.float32(d[g, b, ln] * xd)
                    for lane in range(8):
                        for ln in range(G):
                            acc[lane, ln] = acc[lane, ln] + dv[ln] * np.float32(s[lane, ln])
                _hsum_store(acc, summs, out, t, n0, nv)


QMV_EXACT_NIB = twins(_qmv_exact_nib, fastmath={"contract"})
QMV_EXACT_Q8 = twins(_qmv_exact_q8, fastmath={"contract"})
EXACT_KERNELS: Final = {  # ggml type -> (parallel, serial), the arguments of qmv_nib / qmv_q8
    q.Q4_1: QMV_EXACT_NIB,
    q.Q5_0: QMV_EXACT_NIB,
    q.Q5_1: QMV_EXACT_NIB,
    q.Q8_0: QMV_EXACT_Q8,
}
