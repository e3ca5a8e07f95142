"""Prompt processing (many activation rows) for Q4_K / Q6_K in llama.cpp's order, on BLAS.

The orders (qmv_exact_k.py) reduce integer products exactly before any float step:
- Q4_K in whole groups of 4 activation rows (gemm): per 64 values
  tot = sum sc q x, |tot| <= 64 * 63 * 15 * 127 < 2^24, and
  tmin = sum min (bsum pairs), |tmin| <= 2 * 63 * 2 * 16 * 127 < 2^24;
- Q6_K from 8 rows on (tiled): per 256 values s1 = sum sc (q - 32) x, |s1| < 2^28.
Every partial sum of such integer terms is an integer below 2^24 (float32) or 2^53
(float64), so a BLAS product of integer-valued matrices gives the exact totals in
any summation order: float32 GEMMs over 64-value slices for Q4_K, float64 GEMMs over
256-value slices for Q6_K. The integer weight panels (sc * q, mins) are unpacked
from the lanes arrays one cache-sized panel of rows at a time, and a small numba
epilogue applies the float steps in llama.cpp's order (with real FMAs).
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.qtypes import QK

SB: Final = 256
PANEL_ROWS: Final = 512  # weight rows per panel (a multiple of the 64 lanes)


@nb.njit(cache=True, nogil=True)
def _q4k_int_panel(qs, usc, g0, ng, wq, wm):
    """Groups g0..g0+ng of a Q4_K lanes weight -> wq (K/64, 64, P) f32 = sc * q per
    64-value slice, wm (K/64, 2, P) f32 = the mins of its two 32-value blocks."""
    _, n_blocks, _, G = qs.shape
    for gi in range(ng):
        g = g0 + gi
        c0 = gi * G
        for b in range(n_blocks):
            ch = b // 2
            r0 = (b % 2) * QK
            for ln in range(G):
                wm[ch, b % 2, c0 + ln] = np.float32(usc[g, b, 1, ln])
            for j in range(16):
                for ln in range(G):
                    sc = np.int32(usc[g, b, 0, ln])
                    v = np.int32(qs[g, b, j, ln])
                    wq[ch, r0 + j, c0 + ln] = np.float32(sc * (v & 15))
                    wq[ch, r0 + 16 + j, c0 + ln] = np.float32(sc * (v >> 4))


@nb.njit(cache=True, nogil=True)
def _q6k_int_panel(ql, qh, sc, g0, ng, wq):
    """Groups g0.. of a Q6_K lanes weight -> wq (K/256, 256, P) f64 = sc * (q - 32)."""
    _, n_blocks, _, G = ql.shape
    for gi in range(ng):
        g = g0 + gi
        c0 = gi * G
        for b in range(n_blocks):
            i = b // 8
            r0 = (b % 8) * QK
            for v in range(QK):
                jl = v % 16
                ls = 4 * (v // 16)
                jh = v % 8
                hs = 2 * (v // 8)
                h = v // 16
                for ln in range(G):
                    u = ((np.int32(ql[g, b, jl, ln]) >> ls) & 15) | (
                        ((np.int32(qh[g, b, jh, ln]) >> hs) & 3) << 4
                    )
                    wq[i, r0 + v, c0 + ln] = np.float64(np.int32(sc[g, b, h, ln]) * (u - 32))


@nb.njit(cache=True, nogil=True, fastmath={"contract"})
def _q4k_epilogue(tot, tmin, fsc, g0, xd, t_rows, out, n0):
    """out[t, n0 + c] for t < t_rows: acc = fma(tot, f32(d x.d), acc), accm = fma(tmin,
    f32(dmin x.d), accm) over the 64-value slices in order; acc - accm.
    tot, tmin (K/64, T, P) f32; fsc the lanes (d, dmin) array."""
    n_ch = tot.shape[0]
    P = tot.shape[2]
    G = fsc.shape[3]
    n_g = P // G
    nv = min(P, out.shape[1] - n0)
    acc = np.empty(P, np.float32)
    accm = np.empty(P, np.float32)
    dd = np.empty(P, np.float32)
    dm = np.empty(P, np.float32)
    for t in range(t_rows):
        acc[:] = 0.0
        accm[:] = 0.0
        for ch in range(n_ch):
            if ch % 4 == 0:  # a new super-block: its scales times the activation scale
                i = ch // 4
                yd = xd[t, i]
                for gi in range(n_g):
                    for ln in range(G):
                        dd[gi * G + ln] = np.float32(fsc[g0 + gi, i, 0, ln] * yd)
                        dm[gi * G + ln] = np.float32(fsc[g0 + gi, i, 1, ln] * yd)
            tc = tot[ch, t]
            mc = tmin[ch, t]
            for c in range(P):
                acc[c] = acc[c] + tc[c] * dd[c]
                accm[c] = accm[c] + mc[c] * dm[c]
        for c in range(nv):
            out[t, n0 + c] = np.float32(acc[c] - accm[c])


@nb.njit(cache=True, nogil=True, fastmath={"contract"})
def _q6k_epilogue(s1, d, g0, xd, out, n0):
    """out[t, n0 + c] = sum over super-blocks i in order of fma(f32(d f32(s1)), x.d, .);
    s1 (K/256, T, P) f64 exact integers; d the lanes super-block scales."""
    n_sb, T, P = s1.shape
    G = d.shape[2]
    n_g = P // G
    nv = min(P, out.shape[1] - n0)
    acc = np.empty(P, np.float32)
    res = np.empty(P, np.float32)
    for t in range(T):
        acc[:] = 0.0
        for i in range(n_sb):
            si = s1[i, t]
            for gi in range(n_g):
                for ln in range(G):
                    c = gi * G + ln
                    res[c] = np.float32(d[g0 + gi, i, ln] * np.float32(si[c]))
            yd = xd[t, i]
            for c in range(P):
                acc[c] = acc[c] + res[c] * yd
        for c in range(nv):
            out[t, n0 + c] = acc[c]


def q4k_gemm(
    args: tuple, xq: np.ndarray, xd: np.ndarray, bsums: np.ndarray, rows4: int, out: np.ndarray
) -> None:
    """out[:rows4] for a Q4_K lanes weight (args: qmv_nib's arrays), activations as
    Q8_K (xq (T, K) int, xd, bsums); rows4 a multiple of 4 (the gemm rows)."""
    qs, _, fsc, usc = args[:4]
    ng, n_blocks = qs.shape[0], qs.shape[1]
    k = n_blocks * QK
    n_ch = k // 64
    x = np.ascontiguousarray(
        xq[:rows4].reshape(rows4, n_ch, 64).transpose(1, 0, 2), dtype=np.float32
    )  # (K/64, T, 64)
    b2 = bsums[:rows4].reshape(rows4, k // 32, 2).sum(axis=2)  # bsum pairs per 32 values
    xb = np.ascontiguousarray(b2.reshape(rows4, n_ch, 2).transpose(1, 0, 2), dtype=np.float32)
    gp = PANEL_ROWS // qs.shape[3]
    for g0 in range(0, ng, gp):
        n_g = min(gp, ng - g0)
        p = n_g * qs.shape[3]
        wq = np.empty((n_ch, 64, p), np.float32)
        wm = np.empty((n_ch, 2, p), np.float32)
        _q4k_int_panel(qs, usc, g0, n_g, wq, wm)
        tot = np.matmul(x, wq)  # (K/64, T, P), exact integers
        tmin = np.matmul(xb, wm)
        _q4k_epilogue(tot, tmin, fsc, g0, xd, rows4, out, g0 * qs.shape[3])


def q6k_gemm(args: tuple, xq: np.ndarray, xd: np.ndarray, out: np.ndarray) -> None:
    """out for a Q6_K lanes weight (args: qmv_q8's Q6_K arrays), activations as Q8_K,
    in ggml-cpu/tiled's order (8 activation rows or more)."""
    ql, qh, sc, d = args
    ng, G = ql.shape[0], ql.shape[3]
    t_rows, k = xq.shape
    n_sb = k // SB
    x = np.ascontiguousarray(
        xq.reshape(t_rows, n_sb, SB).transpose(1, 0, 2), dtype=np.float64
    )  # (K/256, T, 256)
    gp = PANEL_ROWS // G
    for g0 in range(0, ng, gp):
        n_g = min(gp, ng - g0)
        wq = np.empty((n_sb, SB, n_g * G), np.float64)
        _q6k_int_panel(ql, qh, sc, g0, n_g, wq)
        _q6k_epilogue(np.matmul(x, wq), d, g0, xd, out, g0 * G)
