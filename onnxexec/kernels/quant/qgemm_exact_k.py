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

from onnxexec.kernels.math.lanes import pick, twins
from onnxexec.kernels.quant.qtypes import QK

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


# -- numba GEMMs over activation tiles (faster than the BLAS ones above at prompt sizes)
# Same exact-integer argument, in float32 registers: a weight row's sc * q (Q4_K, at
# most 945) or sc * (q - 32) (Q6_K, at most 4096) times an int8 activation, summed over
# 64 (Q4_K) or 16 (Q6_K) values, stays below 2^24; Q6_K's 16-value sums are then added
# in int32 (s1 < 2^28). Each 64-value slice of a row group is unpacked once per tile of
# TILE_T activation rows, two rows per pass (see qgemm_exact.py).
TILE_T: Final = 16


@nb.njit(cache=True, nogil=True, inline="always")
def _quads_pair(wf, v0, xf, t, xo, tot, tt, n_quads, first):
    """tot[tt (+1), :] (+)= sum over values v0 .. v0 + 4 n_quads of wf[v] x[t (+1), xo + v],
    exact (integers below 2^24); both rows when tt + 1 < tot rows in use (caller)."""
    G = wf.shape[1]
    for qd in range(n_quads):
        j = v0 + 4 * qd
        x0 = xf[t, xo + j]
        x1 = xf[t, xo + j + 1]
        x2 = xf[t, xo + j + 2]
        x3 = xf[t, xo + j + 3]
        y0 = xf[t + 1, xo + j]
        y1 = xf[t + 1, xo + j + 1]
        y2 = xf[t + 1, xo + j + 2]
        y3 = xf[t + 1, xo + j + 3]
        if first and qd == 0:
            for ln in range(G):
                w0 = wf[j, ln]
                w1 = wf[j + 1, ln]
                w2 = wf[j + 2, ln]
                w3 = wf[j + 3, ln]
                tot[tt, ln] = w0 * x0 + w1 * x1 + w2 * x2 + w3 * x3
                tot[tt + 1, ln] = w0 * y0 + w1 * y1 + w2 * y2 + w3 * y3
        else:
            for ln in range(G):
                w0 = wf[j, ln]
                w1 = wf[j + 1, ln]
                w2 = wf[j + 2, ln]
                w3 = wf[j + 3, ln]
                tot[tt, ln] += w0 * x0 + w1 * x1 + w2 * x2 + w3 * x3
                tot[tt + 1, ln] += w0 * y0 + w1 * y1 + w2 * y2 + w3 * y3


@nb.njit(cache=True, nogil=True, inline="always")
def _quads_one(wf, v0, xf, t, xo, tot, tt, n_quads, first):
    """_quads_pair for the single row t."""
    G = wf.shape[1]
    for qd in range(n_quads):
        j = v0 + 4 * qd
        x0 = xf[t, xo + j]
        x1 = xf[t, xo + j + 1]
        x2 = xf[t, xo + j + 2]
        x3 = xf[t, xo + j + 3]
        if first and qd == 0:
            for ln in range(G):
                tot[tt, ln] = wf[j, ln] * x0 + wf[j + 1, ln] * x1 + wf[j + 2, ln] * x2
                tot[tt, ln] += wf[j + 3, ln] * x3
        else:
            for ln in range(G):
                s = wf[j, ln] * x0 + wf[j + 1, ln] * x1 + wf[j + 2, ln] * x2
                tot[tt, ln] += s + wf[j + 3, ln] * x3


def _gemm_q4k(qs, fsc, usc, xf, xd, bsums, out, n_chunks):
    """out (T, N) for a Q4_K lanes weight in the repack gemm order (qmv_exact_k's
    _qmv_q4k_exact with every row t < rows4): per 64 values acc = fma(f32(tot),
    f32(d x.d), acc), accm = fma(f32(tmin), f32(dmin x.d), accm); out = acc - accm."""
    ng, n_blocks, _, G = qs.shape
    T = xf.shape[0]
    N = out.shape[1]
    nsb = n_blocks // 8
    n_tiles = (T + TILE_T - 1) // TILE_T
    n_items = ng * n_tiles
    n_chunks = max(1, min(n_items, n_chunks))
    for c in nb.prange(n_chunks):
        wf = np.empty((64, G), np.float32)
        tot = np.empty((TILE_T, G), np.float32)
        acc = np.empty((TILE_T, G), np.float32)
        accm = np.empty((TILE_T, G), np.float32)
        dd = np.empty((TILE_T, G), np.float32)
        dm = np.empty((TILE_T, G), np.float32)
        for item in range(c * n_items // n_chunks, (c + 1) * n_items // n_chunks):
            g = item // n_tiles
            t0 = (item % n_tiles) * TILE_T
            tn = min(TILE_T, T - t0)
            n0 = g * G
            acc[:] = 0.0
            accm[:] = 0.0
            for i in range(nsb):
                for tt in range(tn):
                    yd = xd[t0 + tt, i]
                    for ln in range(G):
                        dd[tt, ln] = np.float32(fsc[g, i, 0, ln] * yd)
                        dm[tt, ln] = np.float32(fsc[g, i, 1, ln] * yd)
                for k0 in range(0, 8, 2):
                    b0 = i * 8 + k0
                    for h in range(2):
                        for j in range(16):
                            for ln in range(G):
                                sc = np.int32(usc[g, b0 + h, 0, ln])
                                v = np.int32(qs[g, b0 + h, j, ln])
                                wf[32 * h + j, ln] = np.float32(sc * (v & 15))
                                wf[32 * h + 16 + j, ln] = np.float32(sc * (v >> 4))
                    xo = b0 * QK
                    for tt in range(0, tn - 1, 2):
                        _quads_pair(wf, 0, xf, t0 + tt, xo, tot, tt, 16, True)
                    if tn % 2:
                        _quads_one(wf, 0, xf, t0 + tn - 1, xo, tot, tn - 1, 16, True)
                    for tt in range(tn):
                        t = t0 + tt
                        bs0 = bsums[t, 16 * i + 2 * k0] + bsums[t, 16 * i + 2 * k0 + 1]
                        bs1 = bsums[t, 16 * i + 2 * k0 + 2] + bsums[t, 16 * i + 2 * k0 + 3]
                        for ln in range(G):
                            tmin = np.int32(usc[g, b0, 1, ln]) * bs0
                            tmin += np.int32(usc[g, b0 + 1, 1, ln]) * bs1
                            acc[tt, ln] = acc[tt, ln] + tot[tt, ln] * dd[tt, ln]
                            accm[tt, ln] = accm[tt, ln] + np.float32(tmin) * dm[tt, ln]
            nv = min(G, N - n0)
            for tt in range(tn):
                for ln in range(nv):
                    out[t0 + tt, n0 + ln] = np.float32(acc[tt, ln] - accm[tt, ln])


def _gemm_q6k(ql, qh, sc, d, xf, xd, out, n_chunks):
    """out (T, N) for a Q6_K lanes weight in ggml-cpu/tiled's order (qmv_exact_k's
    tiled branch): per super-block res = f32(d f32(s1)), out = fma(res, x.d, out)."""
    ng, n_blocks, _, G = ql.shape
    T = xf.shape[0]
    N = out.shape[1]
    nsb = n_blocks // 8
    n_tiles = (T + TILE_T - 1) // TILE_T
    n_items = ng * n_tiles
    n_chunks = max(1, min(n_items, n_chunks))
    for c in nb.prange(n_chunks):
        wf = np.empty((QK, G), np.float32)
        tot = np.empty((TILE_T, G), np.float32)
        s1 = np.empty((TILE_T, G), np.int32)
        acc = np.empty((TILE_T, G), np.float32)
        for item in range(c * n_items // n_chunks, (c + 1) * n_items // n_chunks):
            g = item // n_tiles
            t0 = (item % n_tiles) * TILE_T
            tn = min(TILE_T, T - t0)
            n0 = g * G
            acc[:] = 0.0
            for i in range(nsb):
                s1[:] = 0
                for k in range(8):
                    b = i * 8 + k
                    for j in range(8):  # values j, j + 8 (scale 0), j + 16, j + 24 (scale 1)
                        for ln in range(G):
                            l0 = np.int32(ql[g, b, j, ln])
                            l1 = np.int32(ql[g, b, j + 8, ln])
                            hb = np.int32(qh[g, b, j, ln])
                            c0 = np.int32(sc[g, b, 0, ln])
                            c1 = np.int32(sc[g, b, 1, ln])
                            u0 = (l0 & 15) | ((hb & 3) << 4)
                            u1 = (l1 & 15) | (((hb >> 2) & 3) << 4)
                            u2 = (l0 >> 4) | (((hb >> 4) & 3) << 4)
                            u3 = (l1 >> 4) | (((hb >> 6) & 3) << 4)
                            wf[j, ln] = np.float32(c0 * (u0 - 32))
                            wf[j + 8, ln] = np.float32(c0 * (u1 - 32))
                            wf[j + 16, ln] = np.float32(c1 * (u2 - 32))
                            wf[j + 24, ln] = np.float32(c1 * (u3 - 32))
                    xo = b * QK
                    for half in range(2):  # one scale per 16 values: exact f32 sums
                        for tt in range(0, tn - 1, 2):
                            _quads_pair(wf, 16 * half, xf, t0 + tt, xo, tot, tt, 4, True)
                        if tn % 2:
                            _quads_one(wf, 16 * half, xf, t0 + tn - 1, xo, tot, tn - 1, 4, True)
                        for tt in range(tn):
                            for ln in range(G):
                                s1[tt, ln] += np.int32(tot[tt, ln])
                for tt in range(tn):
                    yd = xd[t0 + tt, i]
                    for ln in range(G):
                        res = np.float32(d[g, i, ln] * np.float32(s1[tt, ln]))
                        acc[tt, ln] = acc[tt, ln] + res * yd
            nv = min(G, N - n0)
            for tt in range(tn):
                for ln in range(nv):
                    out[t0 + tt, n0 + ln] = acc[tt, ln]


GEMM_Q4K = twins(_gemm_q4k, fastmath={"contract"})
GEMM_Q6K = twins(_gemm_q6k, fastmath={"contract"})


def q4k_gemm_tiles(
    args: tuple, xq: np.ndarray, xd: np.ndarray, bsums: np.ndarray, out: np.ndarray
) -> None:
    """out (T, N) for a Q4_K lanes weight, every activation row in the gemm order (the
    caller passes only the rows4 rows); activations as Q8_K (quantize_q8_k)."""
    qs, _, fsc, usc = args[:4]
    kern, n_chunks = pick(GEMM_Q4K, xq.shape[0] * out.shape[1] * xq.shape[1])
    kern(qs, fsc, usc, xq.astype(np.float32), xd, bsums, out, n_chunks)


def q6k_gemm_tiles(args: tuple, xq: np.ndarray, xd: np.ndarray, out: np.ndarray) -> None:
    """out (T, N) for a Q6_K lanes weight in the tiled order (T >= 8), x as Q8_K."""
    kern, n_chunks = pick(GEMM_Q6K, xq.shape[0] * out.shape[1] * xq.shape[1])
    kern(*args, xq.astype(np.float32), xd, out, n_chunks)
