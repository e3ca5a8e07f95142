"""The attention kernel's per-head work: softmax rows, and spans of heads as a native
job of the pool (native/parallel.py, KIND_ATTN), so pool threads run heads without
the GIL. Imports nothing from parallel.py (which dispatches to `attn_span`).

A span is a range of head indices b * H + h. Per head: one sgemm for the scores
Q K^T (K^T read in place, transposed or not), the scaled, masked softmax, one sgemm
with V into the output. Handing these to the pool as a Python job cost a GIL hand-off
per worker: Llama-GQA's 9 heads of 64 x 64 ran no faster on 2 threads than on one
(187 against 176 us).
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.linalg import blas
from onnxexec.kernels.math.reduce import LANES, row_max, row_sum
from onnxexec.kernels.math.vmath import exp_row

f32 = np.float32


@nb.njit(nogil=True, cache=True, error_model="numpy")
def softmax_rows(x, mask, has_mask, scale, nan_to_zero, scratch):
    """In place: x[t] = softmax(x[t] * scale + mask[t]) for every row of x (T, S).

    The max and the sum are kernels/math/reduce.py's vectorized reductions. The max
    ignores NaN; a NaN score (or +inf, whose shifted value is inf - inf) makes the
    sum NaN, and such a row is filled like a fully masked one."""
    t_rows, s = x.shape
    sc = f32(scale)
    acc32 = np.empty(LANES, dtype=np.float32)
    for t in range(t_rows):
        row = x[t]
        if has_mask:
            mrow = mask[t]
            for j in range(s):
                row[j] = row[j] * sc + mrow[j]
        elif sc != f32(1.0):
            for j in range(s):
                row[j] = row[j] * sc
        mx = row_max(row, acc32)
        total = np.nan
        if mx != -np.inf:
            for j in range(s):
                row[j] = row[j] - mx
            exp_row(row, row, scratch)
            total = row_sum(row)
        if np.isnan(total):  # fully masked (or NaN) row: Softmax gives NaN everywhere
            fill = f32(0.0) if nan_to_zero else f32(np.nan)
            for j in range(s):
                row[j] = fill
            continue
        inv = f32(1.0 / total)
        for j in range(s):
            row[j] = row[j] * inv


# ----- the span a pool thread runs -----------------------------------------------
# Job arguments (int64 slots; the scale in the float64 array's slot 0). Per-head
# matrices have unit stride along one axis (mha._blas_views checked it): Q rows
# (T, Dh) LDQ floats apart; K^T (Dh, S) and V (S, Dv) read as stored (flag bit 0 / 1
# set: transposed) with leading dims LDK / LDV; head h reads kv head h // (H / HKV).
# The mask, if any, is a C-contiguous (MB, MH, T, S) array (MB in {1, B}, MH in
# {1, H}, MB * 65536 + MH in slot MBH); the output a C-contiguous (B, H, T, Dv).
(
    AFN, AFLAGS, AQ, AQB, AQH, ALDQ, AH, AT, ADH,
    AK, AKB, AKH, ALDK, AHKV, AS,
    AV, AVB, AVH, ALDV, ADV,
    AMASK, AMBH, AOUT,
) = range(23)  # fmt: skip
ATTN_ARGS = 23
TRANS_K, TRANS_V, NAN_TO_ZERO = 1, 2, 4


@nb.njit(nogil=True, cache=True, error_model="numpy")
def attn_span(a, fa, i0, i1):
    """Heads [i0, i1) (index b * H + h) of the attention job in slots `a` (above)."""
    h, t, dh, s, dv = a[AH], a[AT], a[ADH], a[AS], a[ADV]
    group = h // a[AHKV]
    flags = a[AFLAGS]
    tk = blas.TRANS if flags & TRANS_K else blas.NO_TRANS
    tv = blas.TRANS if flags & TRANS_V else blas.NO_TRANS
    mb, mh = a[AMBH] >> 16, a[AMBH] & 0xFFFF
    has_mask = a[AMASK] != 0
    scores = np.empty((t, s), dtype=np.float32)
    scratch = np.empty(s, dtype=np.int32)
    for i in range(i0, i1):
        bi, hi = i // h, i % h
        hk = hi // group
        q = a[AQ] + 4 * (bi * a[AQB] + hi * a[AQH])
        k = a[AK] + 4 * (bi * a[AKB] + hk * a[AKH])
        v = a[AV] + 4 * (bi * a[AVB] + hk * a[AVH])
        out = a[AOUT] + 4 * i * t * dv
        blas.sgemm(a[AFN], tk, t, s, dh, q, a[ALDQ], k, a[ALDK], scores.ctypes.data, s, 0.0)
        mrow = scores  # unused without a mask
        if has_mask:
            m = (min(bi, mb - 1) * mh + min(hi, mh - 1)) * t * s
            mrow = nb.carray(f32_ptr(a[AMASK] + 4 * m), (t, s))
        softmax_rows(scores, mrow, has_mask, fa[0], flags & NAN_TO_ZERO != 0, scratch)
        blas.sgemm(a[AFN], tv, t, dv, s, scores.ctypes.data, s, v, a[ALDV], out, dv, 0.0)
