"""Prompt processing (many activation rows) for Q4_1 / Q5_0 / Q5_1 / Q8_0 lanes weights,
bit for bit what qmv_exact's kernels (llama.cpp's ggml_vec_dot_q*_q8_* order) compute.

Per output value llama.cpp keeps 8 float32 lanes, lane l taking the exact integer sum
of the 4 products of block values 4l..4l+3, then acc[l] = fma(d, float(isum_l),
acc[l]) block by block (see qmv_exact.py). That order has no room for a BLAS product,
but the integer part does not need integers: a weight value (at most 31 in magnitude,
127 for Q8_0) times an int8 activation, summed 4 at a time, stays far below 2^24, so
float32 multiply-adds give the exact isum_l in any order. So each block of a group of
LANES weight rows is unpacked once to float32 (wf, 32 x LANES) and then used for a
tile of TILE_T activation rows, two rows per pass (each weight load feeds two rows):
the qmv kernels instead unpack the nibbles again for every activation row, in int16.

Work items are (row group, activation tile) pairs, split over numba's threads.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.lanes import pick, twins
from onnxexec.kernels.quant.qmv_exact import q5
from onnxexec.kernels.quant.qtypes import QK

TILE_T: Final = 16  # activation rows per tile: the accumulators stay in L1
GEMM_MIN_T: Final = tuning.QGEMM_MIN_T


@nb.njit(cache=True, nogil=True, inline="always")
def _unpack(qs, qh, g, b, sub, wf):
    """Block b of row group g -> wf (32, G) float32 block values (minus sub for Q5_0),
    as qmv_exact reads them: nibbles j / j + 16 (+ fifth bits) or Q8_0's int8."""
    G = qs.shape[3]
    if qs.shape[2] == QK:  # Q8_0
        for j in range(QK):
            for ln in range(G):
                wf[j, ln] = np.float32(qs[g, b, j, ln])
    elif qh.shape[0] > 0:  # Q5_0 / Q5_1
        for j in range(16):
            for ln in range(G):
                lo, hi = q5(qs[g, b, j, ln], qh[g, b, 0, ln], qh[g, b, 1, ln], j, sub)
                wf[j, ln] = np.float32(lo)
                wf[16 + j, ln] = np.float32(hi)
    else:  # Q4_1
        for j in range(16):
            for ln in range(G):
                v = np.int16(qs[g, b, j, ln])
                wf[j, ln] = np.float32(v & 15)
                wf[16 + j, ln] = np.float32(v >> 4)


def _gemm_exact(qs, qh, fsc, off, xf, xst, out, n_chunks):
    """out (T, N) = W . x for Q4_1 / Q5_0 / Q5_1 (qmv_nib's arrays: qs (ng, NB, 16, G),
    qh, fsc (ng, NB, 1 or 2, G) = d (, m)) or Q8_0 (qs (ng, NB, 32, G) i8, fsc the
    scales as (ng, NB, 1, G)); x = quantize_act(x) with xf = float32(xq)."""
    ng, n_blocks, _, G = qs.shape
    T = xf.shape[0]
    N = out.shape[1]
    sub = np.int16(off)
    has_m = fsc.shape[2] > 1
    n_tiles = (T + TILE_T - 1) // TILE_T
    n_items = ng * n_tiles
    n_chunks = max(1, min(n_items, n_chunks))
    for c in nb.prange(n_chunks):
        wf = np.empty((QK, G), np.float32)
        acc = np.empty((TILE_T, 8, G), np.float32)
        summs = np.empty((TILE_T, G), np.float32)
        dv = np.empty((TILE_T, G), np.float32)
        for item in range(c * n_items // n_chunks, (c + 1) * n_items // n_chunks):
            g = item // n_tiles
            t0 = (item % n_tiles) * TILE_T
            tn = min(TILE_T, T - t0)
            n0 = g * G
            nv = min(G, N - n0)
            acc[:] = 0.0
            summs[:] = 0.0
            for b in range(n_blocks):
                _unpack(qs, qh, g, b, sub, wf)
                for tt in range(tn):
                    xd = xst[t0 + tt, 0, b]
                    for ln in range(G):
                        dv[tt, ln] = np.float32(fsc[g, b, 0, ln] * xd)
                    if has_m:
                        xs = xst[t0 + tt, 1, b]
                        for ln in range(G):
                            summs[tt, ln] = summs[tt, ln] + fsc[g, b, 1, ln] * xs
                xo = b * QK
                for tt in range(0, tn - 1, 2):  # two activation rows per weight load
                    t = t0 + tt
                    for lane in range(8):
                        j = 4 * lane
                        x0 = xf[t, xo + j]
                        x1 = xf[t, xo + j + 1]
                        x2 = xf[t, xo + j + 2]
                        x3 = xf[t, xo + j + 3]
                        y0 = xf[t + 1, xo + j]
                        y1 = xf[t + 1, xo + j + 1]
                        y2 = xf[t + 1, xo + j + 2]
                        y3 = xf[t + 1, xo + j + 3]
                        for ln in range(G):
                            w0 = wf[j, ln]
                            w1 = wf[j + 1, ln]
                            w2 = wf[j + 2, ln]
                            w3 = wf[j + 3, ln]
                            s = w0 * x0 + w1 * x1 + w2 * x2 + w3 * x3  # exact
                            r = w0 * y0 + w1 * y1 + w2 * y2 + w3 * y3
                            acc[tt, lane, ln] = acc[tt, lane, ln] + dv[tt, ln] * s
                            acc[tt + 1, lane, ln] = acc[tt + 1, lane, ln] + dv[tt + 1, ln] * r
                if tn % 2:
                    tt = tn - 1
                    t = t0 + tt
                    for lane in range(8):
                        j = 4 * lane
                        x0 = xf[t, xo + j]
                        x1 = xf[t, xo + j + 1]
                        x2 = xf[t, xo + j + 2]
                        x3 = xf[t, xo + j + 3]
                        for ln in range(G):
                            s = wf[j, ln] * x0 + wf[j + 1, ln] * x1
                            s = s + wf[j + 2, ln] * x2 + wf[j + 3, ln] * x3
                            acc[tt, lane, ln] = acc[tt, lane, ln] + dv[tt, ln] * s
            for tt in range(tn):  # hsum_float_8(acc) + summs, as qmv_exact._hsum_store
                t = t0 + tt
                for ln in range(nv):
                    a0 = np.float32(acc[tt, 4, ln] + acc[tt, 0, ln])
                    a1 = np.float32(acc[tt, 5, ln] + acc[tt, 1, ln])
                    a2 = np.float32(acc[tt, 6, ln] + acc[tt, 2, ln])
                    a3 = np.float32(acc[tt, 7, ln] + acc[tt, 3, ln])
                    r = np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))
                    out[t, n0 + ln] = np.float32(r + summs[tt, ln])


# fastmath "contract" only: the a + b * c steps become real FMAs, as in llama.cpp
GEMM_EXACT = twins(_gemm_exact, fastmath={"contract"})
_EMPTY_QH = np.zeros((0, 0, 0, 0), np.int16)


def gemm_exact(args: tuple, layout: str, xq: np.ndarray, xst: np.ndarray, out: np.ndarray) -> None:
    """out (T, N) = W . x for a Q4_1 / Q5_0 / Q5_1 ("nib") or Q8_0 ("q8_0") lanes weight
    given by its kernel arguments, x = quantize_act(x); equals qmv_exact's result."""
    xf = xq.astype(np.float32)
    macs = xq.shape[0] * out.shape[1] * xq.shape[1]
    kern, n_chunks = pick(GEMM_EXACT, macs)
    if layout == "q8_0":
        qs, d = args
        kern(qs, _EMPTY_QH, d[:, :, None, :], 0, xf, xst, out, n_chunks)
    else:
        qs, qh, fsc, _, _, off = args
        kern(qs, qh, fsc, off, xf, xst, out, n_chunks)
