"""Lane kernels for the nibble family: Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K.

Layout (built by onnxexec.kernels.quant.qlayout), per group g of LANES rows, 32-value
block b (K/32 per row), lane ln:
  qs  (ng, NB, 16, G) u8   byte j: value j in the low nibble, value j+16 in the high
  qh  (ng, NB, 2, G) i16   Q5 only: bit j of [0] / [1] = bit 4 of value j / j+16
                           (empty array for Q4)
  fsc f32 scales           SYM: (ng, NB, 1, G) d;  MIN: (ng, NB, 2, G) d, m;
                           KQ: (ng, NB/8, 2, G) super-block d, dmin
  usc (ng, NB, 2, G) u8    KQ only: 6-bit sub-block scale and min
Dequantized value (same float32 operations as gguf-py, so bit-exact):
  SYM (Q4_0 off=8, Q5_0 off=16): d * (q - off)
  MIN (Q4_1, Q5_1):             d * q + m
  KQ  (Q4_K, Q5_K):             (d * sc) * q - dmin * mn
Matvec with int8 activations (actquant.py) follows ggml_vec_dot_q4_0_q8_0 /
q4_1_q8_1: per block an exact integer sum s = sum q * xq, then
(d * xd) * (s - off * sum xq) for SYM and (d * xd) * s + m * xs for MIN/KQ.
The integer sums run in int16 lanes (16 per AVX2 register) sized so they never
overflow; numba's loop vectorizer turns them into vpmullw / vpaddw.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.math.lanes import twins
from onnxexec.kernels.quant.qtypes import QK

SYM: Final = 0
MIN: Final = 1
KQ: Final = 2


def _qmv_nib(qs, qh, fsc, usc, kind, off, xq, xst, out, n_chunks):
    """out (T, N) = x @ W^T from x in int8 blocks: xq, xst = actquant.quantize_act(x).

    Per block and lane, the values j and j+16 are summed in two int16 lanes: 16
    products of at most 15 * 127 (Q4) or, with Q5's values shifted to q - 16, of
    at most 16 * 127 fit, so every integer sum is exact.
    """
    ng, n_blocks, _, G = qs.shape
    T = xq.shape[0]
    N = out.shape[1]
    has_qh = qh.shape[0] > 0
    offf = np.float32(off)
    bias = np.float32(16.0) if has_qh else np.float32(0.0)  # Q5 sums (q - 16) x
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):  # each chunk owns whole groups = whole rows of out
        s0 = np.empty(G, np.int16)
        s1 = np.empty(G, np.int16)
        acc = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                for ln in range(G):
                    acc[ln] = 0.0
                for b in range(n_blocks):
                    for ln in range(G):
                        s0[ln] = 0
                        s1[ln] = 0
                    xo = b * QK
                    if has_qh:
                        for j in range(16):
                            xl = xq[t, xo + j]
                            xh = xq[t, xo + 16 + j]
                            jj = np.int16(j)
                            one = np.int16(1)
                            four = np.int16(4)
                            for ln in range(G):
                                v = np.int16(qs[g, b, j, ln])
                                # numpy ufuncs keep the bit plane in int16 (numba's
                                # operators widen to int64, which does not vectorize)
                                bl = np.bitwise_and(np.right_shift(qh[g, b, 0, ln], jj), one)
                                bh = np.bitwise_and(np.right_shift(qh[g, b, 1, ln], jj), one)
                                lo = np.int16((v & 15) | np.left_shift(bl, four))
                                hi = np.int16((v >> 4) | np.left_shift(bh, four))
                                s0[ln] = np.int16(s0[ln] + np.int16(lo - 16) * xl)
                                s1[ln] = np.int16(s1[ln] + np.int16(hi - 16) * xh)
                    else:
                        for j in range(16):
                            xl = xq[t, xo + j]
                            xh = xq[t, xo + 16 + j]
                            for ln in range(G):
                                v = np.int16(qs[g, b, j, ln])
                                s0[ln] = np.int16(s0[ln] + np.int16(v & 15) * xl)
                                s1[ln] = np.int16(s1[ln] + np.int16(v >> 4) * xh)
                    xd = xst[t, 0, b]
                    xs = xst[t, 1, b]
                    corr = (bias - offf) * xst[t, 2, b]  # exact: s + corr = sum (q - off) xq
                    if kind == SYM:
                        for ln in range(G):
                            isum = np.float32(np.int32(s0[ln]) + np.int32(s1[ln])) + corr
                            acc[ln] += (fsc[g, b, 0, ln] * xd) * isum
                    elif kind == MIN:
                        for ln in range(G):
                            isum = np.float32(np.int32(s0[ln]) + np.int32(s1[ln])) + corr
                            acc[ln] += (fsc[g, b, 0, ln] * xd) * isum + fsc[g, b, 1, ln] * xs
                    else:
                        sb = b // 8
                        for ln in range(G):
                            isum = np.float32(np.int32(s0[ln]) + np.int32(s1[ln])) + corr
                            dl = fsc[g, sb, 0, ln] * np.float32(usc[g, b, 0, ln])
                            ml = fsc[g, sb, 1, ln] * np.float32(usc[g, b, 1, ln])
                            acc[ln] += (dl * xd) * isum - ml * xs
                for ln in range(nv):
                    out[t, n0 + ln] = acc[ln]


def _deq_nib_panel(qs, qh, fsc, usc, kind, off, g0, panel):
    """Groups g0.. of W dequantized into panel (K, P) f32, P a multiple of G: panel = W^T
    rows [g0*G, g0*G + P), ready for x @ panel. Bit-exact with dequantize.

    MIN and KQ share v = d * q + m (KQ stores m = -(dmin * mn): a - b == a + (-b)).
    """
    _, n_blocks, _, G = qs.shape
    has_qh = qh.shape[0] > 0
    offf = np.float32(off)
    for gi in nb.prange(panel.shape[1] // G):
        g = g0 + gi
        c0 = gi * G
        dv = np.empty(G, np.float32)
        mv = np.empty(G, np.float32)
        lo = np.empty(G, np.float32)
        hi = np.empty(G, np.float32)
        for b in range(n_blocks):
            sb = b // 8
            for ln in range(G):
                if kind == KQ:
                    dv[ln] = fsc[g, sb, 0, ln] * np.float32(usc[g, b, 0, ln])
                    mv[ln] = -(fsc[g, sb, 1, ln] * np.float32(usc[g, b, 1, ln]))
                elif kind == MIN:
                    dv[ln] = fsc[g, b, 0, ln]
                    mv[ln] = fsc[g, b, 1, ln]
                else:
                    dv[ln] = fsc[g, b, 0, ln]
            for j in range(16):
                r0 = b * QK + j
                if has_qh:
                    for ln in range(G):
                        v = np.int32(qs[g, b, j, ln])
                        bl = ((qh[g, b, 0, ln] >> j) & 1) << 4
                        bh = ((qh[g, b, 1, ln] >> j) & 1) << 4
                        lo[ln] = np.float32(np.int32((v & 15) | bl))
                        hi[ln] = np.float32(np.int32((v >> 4) | bh))
                else:
                    for ln in range(G):
                        v = np.int32(qs[g, b, j, ln])
                        lo[ln] = np.float32(np.int32(v & 15))
                        hi[ln] = np.float32(np.int32(v >> 4))
                if kind == SYM:
                    for ln in range(G):
                        panel[r0, c0 + ln] = dv[ln] * (lo[ln] - offf)
                        panel[r0 + 16, c0 + ln] = dv[ln] * (hi[ln] - offf)
                else:
                    for ln in range(G):
                        panel[r0, c0 + ln] = dv[ln] * lo[ln] + mv[ln]
                        panel[r0 + 16, c0 + ln] = dv[ln] * hi[ln] + mv[ln]


def _deq_nib_rows(qs, qh, fsc, usc, kind, off, ids, out):
    """out[i] = row ids[i] of W, dequantized (bit-exact with dequantize); out (n, K)."""
    _, n_blocks, _, G = qs.shape
    has_qh = qh.shape[0] > 0
    offf = np.float32(off)
    for i in nb.prange(ids.shape[0]):
        g = ids[i] // G
        ln = ids[i] - g * G
        for b in range(n_blocks):
            sb = b // 8
            if kind == SYM:
                d = fsc[g, b, 0, ln]
                m = np.float32(0.0)
            elif kind == MIN:
                d = fsc[g, b, 0, ln]
                m = fsc[g, b, 1, ln]
            else:
                d = fsc[g, sb, 0, ln] * np.float32(usc[g, b, 0, ln])
                m = fsc[g, sb, 1, ln] * np.float32(usc[g, b, 1, ln])
            h0 = np.int32(qh[g, b, 0, ln]) if has_qh else np.int32(0)
            h1 = np.int32(qh[g, b, 1, ln]) if has_qh else np.int32(0)
            for j in range(16):
                v = np.int32(qs[g, b, j, ln])
                lo = np.int32((v & 15) | (((h0 >> j) & 1) << 4))
                hi = np.int32((v >> 4) | (((h1 >> j) & 1) << 4))
                r0 = b * QK + j
                if kind == SYM:
                    out[i, r0] = d * (np.float32(lo) - offf)
                    out[i, r0 + 16] = d * (np.float32(hi) - offf)
                elif kind == MIN:
                    out[i, r0] = d * np.float32(lo) + m
                    out[i, r0 + 16] = d * np.float32(hi) + m
                else:
                    out[i, r0] = d * np.float32(lo) - m
                    out[i, r0 + 16] = d * np.float32(hi) - m


# contract lets the scaled epilogue fuse into FMAs (bounded by the qmatmul tests)
QMV_NIB = twins(_qmv_nib, fastmath={"contract"})
DEQ_NIB_PANEL = twins(_deq_nib_panel)
DEQ_NIB_ROWS = twins(_deq_nib_rows)
