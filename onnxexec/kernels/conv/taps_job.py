"""The tap-GEMM conv's tile kernels (kernels/conv/conv_taps.py) and their native-pool job.

`taps_span` runs tiles of output rows (or, for few rows, ranges of output channels)
as a native job of the pool (native/parallel.py, KIND_TAPS), so the workers never
take the GIL: as a Python job every worker took it to start and to finish its span.
Imports nothing from parallel.py, which dispatches to `taps_span`.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.linalg import blas
from onnxexec.kernels.math.activations import act_row

f32 = np.float32
_NO_Z = np.zeros((1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _taps_rows(fn, xq, w, m0, m1, geo, i0, i1, ext, y, bias, has_b, z, has_z, code, al, be):
    """Output rows [i0, i1) of channels [m0, m1): ext (m1 - m0, rows * wq) = sum over taps
    of w[m0:m1, a, b, :] @ xq tap matrix, then y[m, i * OW + j] = act(ext + bias + z).

    xq (S, Cg, hq, wq) phase planes, w (M, KH, KW, Cg) C-contiguous, y / z (M, OH * OW).
    geo = (KH, KW, sh, sw, dh, dw, OW)."""
    kh, kw, sh, sw, dh, dw, ow = geo
    cg, hq, wq = xq.shape[1], xq.shape[2], xq.shape[3]
    rows = i1 - i0
    n = rows * wq
    mm = m1 - m0
    ldw = kh * kw * cg
    wbase = w.ctypes.data + 4 * m0 * ldw
    for a in range(kh):
        for b in range(kw):
            ra, cb = a * dh, b * dw
            plane = (ra % sh) * sw + cb % sw
            off = (i0 + ra // sh) * wq + cb // sw
            src = xq.ctypes.data + 4 * (plane * cg * hq * wq + off)
            beta = f32(0.0) if a == 0 and b == 0 else f32(1.0)
            wt = wbase + 4 * (a * kw + b) * cg
            blas.sgemm(
                fn, blas.NO_TRANS, mm, n, cg, wt, ldw, src, hq * wq, ext.ctypes.data, n, beta
            )
    tmp = np.empty(ow, dtype=np.float32)
    scratch = np.empty(ow, dtype=np.int32)
    a32, b32 = f32(al), f32(be)
    for r in range(mm):
        m = m0 + r
        b0 = bias[m] if has_b else f32(0.0)
        for i in range(rows):
            src_row = ext[r, i * wq : i * wq + ow]
            dst = y[m, (i0 + i) * ow : (i0 + i + 1) * ow]
            if has_z:
                zr = z[m, (i0 + i) * ow : (i0 + i + 1) * ow]
                for j in range(ow):
                    dst[j] = src_row[j] + b0 + zr[j]
            else:
                for j in range(ow):
                    dst[j] = src_row[j] + b0
            act_row(dst, code, a32, b32, tmp, scratch)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def taps_span_run(fn, xq, w, m0, m1, geo, oh, t0, t1, rpt, y, bias, has_b, z, has_z, code, al, be):
    """Tiles [t0, t1) of `rpt` output rows each, channels [m0, m1)."""
    wq = xq.shape[3]
    mm = m1 - m0
    ext = np.empty(mm * rpt * wq, dtype=np.float32)
    for t in range(t0, t1):
        i0 = t * rpt
        i1 = min(oh, i0 + rpt)
        e = ext[: mm * (i1 - i0) * wq].reshape((mm, (i1 - i0) * wq))  # sgemm's ldc = n
        _taps_rows(fn, xq, w, m0, m1, geo, i0, i1, e, y, bias, has_b, z, has_z, code, al, be)


# ----- the span a pool thread runs ---------------------------------------------------
# Job arguments (slots of the pool's int64 array; alpha / beta in its float64 array):
# the sgemm address, xq (S, Cg, hq, wq) phase planes, w (M, KH, KW, Cg), y (M, OH * OW),
# bias (M,) and the residual z (M, OH * OW) or 0 (addresses of C-contiguous float32),
# the geometry, rows per tile, the activation and the split: spans are ranges of
# tiles (CHANS 0) or of output channels (CHANS 1).
(
    TFN, TXQ, TS, TCG, THQ, TWQ, TW, TM, TKH, TKW, TSH, TSW, TDH, TDW, TOH, TOW,
    TRPT, TY, TBIAS, TZ, TACT, TCHANS,
) = range(22)  # fmt: skip
TAPS_ARGS = 22


@nb.njit(nogil=True, cache=True)
def taps_span(a, fa, s0, s1):
    """Span [s0, s1) of the tap job in slots `a` (above)."""
    m, oh, ow, rpt = a[TM], a[TOH], a[TOW], a[TRPT]
    xq = nb.carray(f32_ptr(a[TXQ]), (a[TS], a[TCG], a[THQ], a[TWQ]))
    w = nb.carray(f32_ptr(a[TW]), (m, a[TKH], a[TKW], a[TCG]))
    y = nb.carray(f32_ptr(a[TY]), (m, oh * ow))
    has_b, has_z = a[TBIAS] != 0, a[TZ] != 0
    bias = nb.carray(f32_ptr(a[TBIAS]), (m,)) if has_b else _NO_Z[0]
    z = nb.carray(f32_ptr(a[TZ]), (m, oh * ow)) if has_z else _NO_Z
    geo = (a[TKH], a[TKW], a[TSH], a[TSW], a[TDH], a[TDW], ow)
    m0, m1, t0, t1 = 0, m, s0, s1
    if a[TCHANS]:
        m0, m1, t0, t1 = s0, s1, 0, -(-oh // rpt)
    taps_span_run(
        a[TFN], xq, w, m0, m1, geo, oh, t0, t1, rpt, y, bias, has_b, z, has_z, a[TACT],
        fa[0], fa[1],
    )  # fmt: skip
