"""The gathering im2col of kernels/conv/conv2d.py and its tile job for the native pool.

`im2col_rows` builds the column matrix of whole output rows; `im2col_span` runs
tiles of them (column matrix, one sgemm, the bias / residual / activation epilogue)
as a native job of the pool (native/parallel.py, KIND_IM2COL), so the workers never
take the GIL (see kernels/conv/depthwise_planes.py). Imports nothing from parallel.py.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.conv.pointwise_packed import cols_for, pointwise_block_span
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.linalg import blas, sgemm_packed
from onnxexec.kernels.math.activations import epilogue_jit

f32 = np.float32
U = np.uint64


@nb.njit(inline="always", cache=True)
def _col_range(ow, sw, off, width):
    """Output columns j whose input column j * sw + off lies in [0, width)."""
    lo = 0 if off >= 0 else (-off + sw - 1) // sw
    hi = (width - 1 - off) // sw + 1 if width - 1 - off >= 0 else 0
    return lo, max(lo, min(hi, ow))


@nb.njit(nogil=True, cache=True, error_model="numpy")
def im2col_rows(x, c0, c1, kh, kw, sh, sw, ph, pw, dh, dw, ow, i0, i1, cols):
    """cols[(c, a, b), (i - i0) * ow + j] = x[c, i*sh - ph + a*dh, j*sw - pw + b*dw] (0 outside)."""
    height, width = x.shape[1], x.shape[2]
    for c in range(c0, c1):
        for a in range(kh):
            for b in range(kw):
                row = cols[((c - c0) * kh + a) * kw + b]
                off = b * dw - pw
                lo, hi = _col_range(ow, sw, off, width)
                for i in range(i0, i1):
                    dst = row[(i - i0) * ow : (i - i0 + 1) * ow]
                    r = i * sh - ph + a * dh
                    if r < 0 or r >= height:
                        for j in range(ow):
                            dst[j] = f32(0.0)
                        continue
                    for j in range(lo):
                        dst[j] = f32(0.0)
                    if hi > lo and sw == 2:
                        # a constant stride with unsigned indices: LLVM deinterleaves
                        # with shuffles (2.5x faster than the strided slice below)
                        xr = x[c, r]
                        s0 = U(lo * 2 + off)
                        d = dst[lo:hi]
                        for j in range(hi - lo):
                            d[U(j)] = xr[s0 + U(2) * U(j)]
                    elif hi > lo:
                        # slices, not offset indices: see _depthwise
                        src = x[c, r, lo * sw + off : (hi - 1) * sw + off + 1 : sw]
                        d = dst[lo:hi]
                        for j in range(hi - lo):
                            d[j] = src[j]
                    for j in range(hi, ow):
                        dst[j] = f32(0.0)


# ----- the tile span a pool thread runs ---------------------------------------------
# Job arguments (slots of the pool's int64 array; alpha / beta in its float64 array):
# the sgemm address, x (C, H, W), the weight (MG, CK) with CK = (C1 - C0) * KH * KW and
# y (MG, OH * OW) (addresses of C-contiguous float32), bias (MG,) and the residual z
# (MG, OH * OW) or 0, the activation code, the geometry, and output rows per tile.
# Spans are ranges of tiles.
(
    IFN, IX, IC, IH, IW, IC0, IC1, IKH, IKW, ISH, ISW, IPH, IPW, IDH, IDW,
    IOH, IOW, IWM, IMG, IY, IBIAS, IZ, IACT, IROWS,
) = range(24)  # fmt: skip
IM_ARGS = 24
_NO_Z = np.zeros((1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True)
def im2col_span(a, fa, t0, t1):
    """Tiles [t0, t1) of the im2col job in slots `a` (above): y[:, tile] =
    epilogue(w @ im2col(x)[:, tile])."""
    c0, c1, kh, kw, oh, ow = a[IC0], a[IC1], a[IKH], a[IKW], a[IOH], a[IOW]
    mg, rows, p = a[IMG], a[IROWS], a[IOH] * a[IOW]
    ck = (c1 - c0) * kh * kw
    x = nb.carray(f32_ptr(a[IX]), (a[IC], a[IH], a[IW]))
    y = nb.carray(f32_ptr(a[IY]), (mg, p))
    has_b, has_z = a[IBIAS] != 0, a[IZ] != 0
    bias = nb.carray(f32_ptr(a[IBIAS]), (mg,)) if has_b else _NO_Z[0]
    z = nb.carray(f32_ptr(a[IZ]), (mg, p)) if has_z else _NO_Z
    buf = np.empty(ck * rows * ow, dtype=np.float32)
    # a shallow product (a network's stem: 27 deep for 3 x 3 x 3) goes through the
    # packed tiles, which write each output once with the epilogue applied while the
    # block is in L2 (see pointwise_packed); OpenBLAS adds two passes over it
    packed = sgemm_packed.AVAILABLE and ck <= mg
    if packed:
        wm = nb.carray(f32_ptr(a[IWM]), (mg, ck))
        nr = sgemm_packed.NR
        bcols = cols_for(mg, nr)
    for t in range(t0, t1):
        i0, i1 = t * rows, min((t + 1) * rows, oh)
        width = (i1 - i0) * ow
        cols = buf[: ck * width].reshape(ck, width)
        im2col_rows(
            x, c0, c1, kh, kw, a[ISH], a[ISW], a[IPH], a[IPW], a[IDH], a[IDW], ow, i0, i1, cols
        )
        if packed:
            pointwise_block_span(
                wm, cols, y, i0 * ow, bias, has_b, z, has_z, a[IACT], fa[0], fa[1],
                0, mg, 0, width, nr, bcols,
            )  # fmt: skip
            continue
        blas.sgemm(
            a[IFN], blas.NO_TRANS, mg, width, ck, a[IWM], ck, cols.ctypes.data, width,
            a[IY] + 4 * i0 * ow, p, f32(0.0),
        )  # fmt: skip
        if has_b or has_z or a[IACT] != Activation.NONE:
            epilogue_jit(y, i0 * ow, i1 * ow, bias, has_b, True, z, has_z, a[IACT], fa[0], fa[1])
