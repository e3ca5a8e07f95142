"""Lane kernels for Q8_0 and Q6_K (layouts from onnxexec.kernels.quant.qlayout).

Q8_0: qs (ng, NB, 32, G) i8, d (ng, NB, G) f32; value = q * d
      (ggml_vec_dot_q8_0_q8_0: per block (d * xd) * sum q * xq).
Q6_K: per 32-value block b: ql (ng, NB, 16, G) u8 (byte j: low 4 bits of values j
      and j+16), qh (ng, NB, 8, G) u8 (byte j: top 2 bits of values j, j+8, j+16,
      j+24 at bits 0, 2, 4, 6), sc (ng, NB, 2, G) i8 (scales of values 0..15, 16..31),
      d (ng, NB/8, G) f32 super-block scale; value = (d * sc) * (q - 32), q in 0..63.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.math.lanes import twins
from onnxexec.kernels.quant.qtypes import QK


def _qmv_q8(qs, d, xq, xst, out, n_chunks):
    """out (T, N) = x @ W^T from x in int8 blocks: xq, xst = actquant.quantize_act(x).

    Pairs of products (|q x| <= 128 * 127) are summed in int16, then widened into
    int32 block sums: exact.
    """
    ng, n_blocks, _, G = qs.shape
    T = xq.shape[0]
    N = out.shape[1]
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):  # each chunk owns whole groups = whole rows of out
        s = np.empty(G, np.int32)
        acc = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                for ln in range(G):
                    acc[ln] = 0.0
                for b in range(n_blocks):
                    for ln in range(G):
                        s[ln] = 0
                    xo = b * QK
                    for j in range(0, QK, 4):
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
                            s[ln] = np.int32(s[ln] + np.int32(p) + np.int32(r))
                    xd = xst[t, 0, b]
                    for ln in range(G):
                        acc[ln] += (d[g, b, ln] * xd) * np.float32(s[ln])
                for ln in range(nv):
                    out[t, n0 + ln] = acc[ln]


def _deq_q8_panel(qs, d, g0, panel):
    """Groups g0.. dequantized into panel (K, P) = W^T rows [g0*G, g0*G+P) (bit-exact).

    Converting through a small buffer lets numba vectorize the lane loops.
    """
    _, n_blocks, _, G = qs.shape
    for gi in nb.prange(panel.shape[1] // G):
        g = g0 + gi
        c0 = gi * G
        tmp = np.empty(G, np.float32)
        for b in range(n_blocks):
            for j in range(QK):
                for ln in range(G):
                    tmp[ln] = np.float32(qs[g, b, j, ln])
                for ln in range(G):
                    panel[b * QK + j, c0 + ln] = tmp[ln] * d[g, b, ln]


def _deq_q8_rows(qs, d, ids, out):
    """out[i] = row ids[i] of W (bit-exact); out (n, K)."""
    _, n_blocks, _, G = qs.shape
    for i in nb.prange(ids.shape[0]):
        g = ids[i] // G
        ln = ids[i] - g * G
        for b in range(n_blocks):
            for j in range(QK):
                out[i, b * QK + j] = np.float32(qs[g, b, j, ln]) * d[g, b, ln]


def _qmv_q6k(ql, qh, sc, d, xq, xst, out, n_chunks):
    """out (T, N) = x @ W^T from x in int8 blocks: xq, xst = actquant.quantize_act(x).

    Values j, j+8, j+16, j+24 of a block go to four int16 sums of 8 products each
    (|(q - 32) x| <= 32 * 127): exact; the two 16-value halves have their own scale.
    """
    ng, n_blocks, _, G = ql.shape
    T = xq.shape[0]
    N = out.shape[1]
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):  # each chunk owns whole groups = whole rows of out
        sa = np.empty(G, np.int16)
        sb = np.empty(G, np.int16)
        sc_ = np.empty(G, np.int16)
        se = np.empty(G, np.int16)
        acc = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                for ln in range(G):
                    acc[ln] = 0.0
                for b in range(n_blocks):
                    for ln in range(G):
                        sa[ln] = 0
                        sb[ln] = 0
                        sc_[ln] = 0
                        se[ln] = 0
                    xo = b * QK
                    for j in range(8):
                        xa = xq[t, xo + j]
                        xb = xq[t, xo + 8 + j]
                        xc = xq[t, xo + 16 + j]
                        xe = xq[t, xo + 24 + j]
                        for ln in range(G):
                            la = np.int16(ql[g, b, j, ln])
                            lb = np.int16(ql[g, b, j + 8, ln])
                            h = np.int16(qh[g, b, j, ln])
                            va = np.int16(((la & 15) | ((h & 3) << 4)) - 32)
                            vb = np.int16(((lb & 15) | (((h >> 2) & 3) << 4)) - 32)
                            vc = np.int16(((la >> 4) | (((h >> 4) & 3) << 4)) - 32)
                            ve = np.int16(((lb >> 4) | (((h >> 6) & 3) << 4)) - 32)
                            sa[ln] = np.int16(sa[ln] + va * xa)
                            sb[ln] = np.int16(sb[ln] + vb * xb)
                            sc_[ln] = np.int16(sc_[ln] + vc * xc)
                            se[ln] = np.int16(se[ln] + ve * xe)
                    xd = xst[t, 0, b]
                    sbi = b // 8
                    for ln in range(G):
                        dd = d[g, sbi, ln]
                        d0 = dd * np.float32(sc[g, b, 0, ln])
                        d1 = dd * np.float32(sc[g, b, 1, ln])
                        i0 = np.int32(sa[ln]) + np.int32(sb[ln])
                        i1 = np.int32(sc_[ln]) + np.int32(se[ln])
                        acc[ln] += (d0 * xd) * np.float32(i0) + (d1 * xd) * np.float32(i1)
                for ln in range(nv):
                    out[t, n0 + ln] = acc[ln]


def _q6k_value(ql, qh, g, b, i, ln):
    """q - 32 of value i (0..31) of block b, lane ln."""
    byte = np.int32(ql[g, b, i % 16, ln])
    low = (byte >> 4) if i >= 16 else (byte & 15)
    high = (np.int32(qh[g, b, i % 8, ln]) >> (2 * (i // 8))) & 3
    return np.int32((low | (high << 4)) - 32)


_q6k_value_jit = nb.njit(cache=True, nogil=True, inline="always")(_q6k_value)


def _deq_q6k_panel(ql, qh, sc, d, g0, panel):
    """Groups g0.. dequantized into panel (K, P) = W^T rows [g0*G, g0*G+P) (bit-exact)."""
    _, n_blocks, _, G = ql.shape
    for gi in nb.prange(panel.shape[1] // G):
        g = g0 + gi
        c0 = gi * G
        d0 = np.empty(G, np.float32)
        d1 = np.empty(G, np.float32)
        va = np.empty(G, np.float32)
        vb = np.empty(G, np.float32)
        vc = np.empty(G, np.float32)
        ve = np.empty(G, np.float32)
        for b in range(n_blocks):
            for ln in range(G):
                dd = d[g, b // 8, ln]
                d0[ln] = dd * np.float32(sc[g, b, 0, ln])
                d1[ln] = dd * np.float32(sc[g, b, 1, ln])
            for j in range(8):
                for ln in range(G):
                    la = np.int32(ql[g, b, j, ln])
                    lb = np.int32(ql[g, b, j + 8, ln])
                    h = np.int32(qh[g, b, j, ln])
                    va[ln] = np.float32(np.int32(((la & 15) | ((h & 3) << 4)) - 32))
                    vb[ln] = np.float32(np.int32(((lb & 15) | (((h >> 2) & 3) << 4)) - 32))
                    vc[ln] = np.float32(np.int32(((la >> 4) | (((h >> 4) & 3) << 4)) - 32))
                    ve[ln] = np.float32(np.int32(((lb >> 4) | (((h >> 6) & 3) << 4)) - 32))
                r = b * QK + j
                for ln in range(G):
                    panel[r, c0 + ln] = d0[ln] * va[ln]
                    panel[r + 8, c0 + ln] = d0[ln] * vb[ln]
                    panel[r + 16, c0 + ln] = d1[ln] * vc[ln]
                    panel[r + 24, c0 + ln] = d1[ln] * ve[ln]


def _deq_q6k_rows(ql, qh, sc, d, ids, out):
    """out[i] = row ids[i] of W (bit-exact); out (n, K)."""
    _, n_blocks, _, G = ql.shape
    for r in nb.prange(ids.shape[0]):
        g = ids[r] // G
        ln = ids[r] - g * G
        for b in range(n_blocks):
            for i in range(QK):
                dl = d[g, b // 8, ln] * np.float32(sc[g, b, i // 16, ln])
                out[r, b * QK + i] = dl * np.float32(_q6k_value_jit(ql, qh, g, b, i, ln))


# contract: FMAs in the scaled epilogue (bounded by the qmatmul tests)
QMV_Q8 = twins(_qmv_q8, fastmath={"contract"})
DEQ_Q8_PANEL = twins(_deq_q8_panel)
DEQ_Q8_ROWS = twins(_deq_q8_rows)
QMV_Q6K = twins(_qmv_q6k, fastmath={"contract"})
DEQ_Q6K_PANEL = twins(_deq_q6k_panel)
DEQ_Q6K_ROWS = twins(_deq_q6k_rows)
