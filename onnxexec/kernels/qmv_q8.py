"""Lane kernels for Q8_0 and Q6_K (layouts from onnxexec.kernels.qlayout).

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

from onnxexec.kernels.lanes import twins
from onnxexec.kernels.qtypes import QK


def _qmv_q8(qs, d, xq, xst, out):
    """out (T, N) = W x for int8-quantized rows xq (T, K), xst (T, 3, NB)."""
    ng, n_blocks, _, G = qs.shape
    T = xq.shape[0]
    N = out.shape[1]
    for g in nb.prange(ng):  # each group writes only its own rows of out
        s = np.empty(G, np.float32)
        acc = np.empty(G, np.float32)
        n0 = g * G
        nv = min(G, N - n0)
        for t in range(T):
            for l in range(G):
                acc[l] = 0.0
            for b in range(n_blocks):
                for l in range(G):
                    s[l] = 0.0
                xo = b * QK
                for j in range(QK):
                    xv = xq[t, xo + j]
                    for l in range(G):
                        s[l] += np.float32(np.int32(qs[g, b, j, l])) * xv
                xd = xst[t, 0, b]
                for l in range(G):
                    acc[l] += (d[g, b, l] * xd) * s[l]
            for l in range(nv):
                out[t, n0 + l] = acc[l]


def _deq_q8_panel(qs, d, g0, panel):
    """Groups g0.. dequantized into panel (K, P) = W^T rows [g0*G, g0*G+P) (bit-exact)."""
    _, n_blocks, _, G = qs.shape
    for gi in nb.prange(panel.shape[1] // G):
        g = g0 + gi
        c0 = gi * G
        for b in range(n_blocks):
            for j in range(QK):
                for l in range(G):
                    panel[b * QK + j, c0 + l] = np.float32(qs[g, b, j, l]) * d[g, b, l]


def _deq_q8_rows(qs, d, ids, out):
    """out[i] = row ids[i] of W (bit-exact); out (n, K)."""
    _, n_blocks, _, G = qs.shape
    for i in nb.prange(ids.shape[0]):
        g = ids[i] // G
        l = ids[i] - g * G
        for b in range(n_blocks):
            for j in range(QK):
                out[i, b * QK + j] = np.float32(qs[g, b, j, l]) * d[g, b, l]


def _qmv_q6k(ql, qh, sc, d, xq, xst, out):
    """out (T, N) = W x for int8-quantized rows xq (T, K), xst (T, 3, NB)."""
    ng, n_blocks, _, G = ql.shape
    T = xq.shape[0]
    N = out.shape[1]
    for g in nb.prange(ng):  # each group writes only its own rows of out
        s0 = np.empty(G, np.float32)
        s1 = np.empty(G, np.float32)
        acc = np.empty(G, np.float32)
        n0 = g * G
        nv = min(G, N - n0)
        for t in range(T):
            for l in range(G):
                acc[l] = 0.0
            for b in range(n_blocks):
                for l in range(G):
                    s0[l] = 0.0
                    s1[l] = 0.0
                xo = b * QK
                for j in range(8):
                    xa = xq[t, xo + j]
                    xb = xq[t, xo + 8 + j]
                    xc = xq[t, xo + 16 + j]
                    xe = xq[t, xo + 24 + j]
                    for l in range(G):
                        la = np.int32(ql[g, b, j, l])
                        lb = np.int32(ql[g, b, j + 8, l])
                        h = np.int32(qh[g, b, j, l])
                        va = np.int32(((la & 15) | ((h & 3) << 4)) - 32)
                        vb = np.int32(((lb & 15) | (((h >> 2) & 3) << 4)) - 32)
                        vc = np.int32(((la >> 4) | (((h >> 4) & 3) << 4)) - 32)
                        ve = np.int32(((lb >> 4) | (((h >> 6) & 3) << 4)) - 32)
                        s0[l] += np.float32(va) * xa + np.float32(vb) * xb
                        s1[l] += np.float32(vc) * xc + np.float32(ve) * xe
                xd = xst[t, 0, b]
                sb = b // 8
                for l in range(G):
                    dd = d[g, sb, l]
                    d0 = dd * np.float32(sc[g, b, 0, l])
                    d1 = dd * np.float32(sc[g, b, 1, l])
                    acc[l] += (d0 * xd) * s0[l] + (d1 * xd) * s1[l]
            for l in range(nv):
                out[t, n0 + l] = acc[l]


def _q6k_value(ql, qh, g, b, i, l):
    """q - 32 of value i (0..31) of block b, lane l."""
    byte = np.int32(ql[g, b, i % 16, l])
    low = (byte >> 4) if i >= 16 else (byte & 15)
    high = (np.int32(qh[g, b, i % 8, l]) >> (2 * (i // 8))) & 3
    return np.int32((low | (high << 4)) - 32)


_q6k_value_jit = nb.njit(cache=True, nogil=True, inline="always")(_q6k_value)


def _deq_q6k_panel(ql, qh, sc, d, g0, panel):
    """Groups g0.. dequantized into panel (K, P) = W^T rows [g0*G, g0*G+P) (bit-exact)."""
    _, n_blocks, _, G = ql.shape
    for gi in nb.prange(panel.shape[1] // G):
        g = g0 + gi
        c0 = gi * G
        for b in range(n_blocks):
            for i in range(QK):
                for l in range(G):
                    dl = d[g, b // 8, l] * np.float32(sc[g, b, i // 16, l])
                    v = _q6k_value_jit(ql, qh, g, b, i, l)
                    panel[b * QK + i, c0 + l] = dl * np.float32(v)


def _deq_q6k_rows(ql, qh, sc, d, ids, out):
    """out[i] = row ids[i] of W (bit-exact); out (n, K)."""
    _, n_blocks, _, G = ql.shape
    for r in nb.prange(ids.shape[0]):
        g = ids[r] // G
        l = ids[r] - g * G
        for b in range(n_blocks):
            for i in range(QK):
                dl = d[g, b // 8, l] * np.float32(sc[g, b, i // 16, l])
                out[r, b * QK + i] = dl * np.float32(_q6k_value_jit(ql, qh, g, b, i, l))


# contract: FMAs in the exact integer sums and the epilogue (bounded by the qmatmul tests)
QMV_Q8 = twins(_qmv_q8, fastmath={"contract"})
DEQ_Q8_PANEL = twins(_deq_q8_panel)
DEQ_Q8_ROWS = twins(_deq_q8_rows)
QMV_Q6K = twins(_qmv_q6k, fastmath={"contract"})
DEQ_Q6K_PANEL = twins(_deq_q6k_panel)
DEQ_Q6K_ROWS = twins(_deq_q6k_rows)
