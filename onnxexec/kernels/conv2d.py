"""2-D float32 convolution for the fused Conv op, bias and activation included.

- 1x1, stride 1, no padding: one matrix product W (M, C) @ X (C, H*W) per image and
  group, split over output columns (or channels) across threads.
- depthwise (one input channel per group): direct accumulation, one output plane per
  work item; the tap loop runs along output columns (contiguous loads at stride 1,
  so it vectorizes), padding handled by clipping each tap's column range.
- anything else: im2col in tiles of whole output rows (each tile's column matrix
  stays around 2 MiB, in cache) and one sgemm per tile into the output's columns;
  tiles are split across threads, each building its own column matrix.

Every path finishes the output with the epilogue (bias per channel + activation)
while the tile is hot. References: onnxexec.ops.conv.conv_nd (the unfused op).
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

from onnxexec.kernels.activations import act_row, epilogue
from onnxexec.kernels.parallel import num_threads, parallel_for

f32 = np.float32
_TILE_ELEMS = 1 << 19  # floats per im2col tile (2 MiB)
_NO_BIAS = np.zeros(1, dtype=np.float32)
_BLOCK = 1024  # output elements per depthwise tile (4 KiB)


@nb.njit(inline="always", cache=True)
def _col_range(ow, sw, off, width):
    """Output columns j whose input column j * sw + off lies in [0, width)."""
    lo = 0 if off >= 0 else (-off + sw - 1) // sw
    hi = (width - 1 - off) // sw + 1 if width - 1 - off >= 0 else 0
    return lo, max(lo, min(hi, ow))


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _im2col_rows(x, c0, c1, kh, kw, sh, sw, ph, pw, dh, dw, ow, i0, i1, cols):
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
                    if hi > lo:
                        # slices, not offset indices: see _depthwise
                        src = x[c, r, lo * sw + off : (hi - 1) * sw + off + 1 : sw]
                        d = dst[lo:hi]
                        for j in range(hi - lo):
                            d[j] = src[j]
                    for j in range(hi, ow):
                        dst[j] = f32(0.0)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _depthwise(x, w, bias, has_bias, sh, sw, ph, pw, dh, dw, out, m0, m1, code, alpha, beta):
    """out[m] = sum_{a,b} w[m, a, b] * x[m // mult] shifted, + bias[m], activated; m0..m1.

    Each input plane is copied into a zero-padded scratch plane of width wp; then with
    the output laid out at the same row width ("virtual" columns j >= OW are junk) every
    tap is one long loop: ext[p] += xp[s * p + a * dh * wp + b * dw] with s = the
    stride when sh == sw (else row by row).
    """
    mult = out.shape[0] // x.shape[0]
    height, width = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    kh, kw = w.shape[1], w.shape[2]
    wp = max(width + pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    hp = max(height + ph, (oh - 1) * sh + (kh - 1) * dh + 1) + sh
    xp = np.zeros(hp * wp, dtype=np.float32)
    ext = np.empty(oh * wp, dtype=np.float32)
    tmp = np.empty(ow, dtype=np.float32)
    scratch = np.empty(ow, dtype=np.int32)
    last_c = -1
    for m in range(m0, m1):
        c = m // mult
        if c != last_c:
            for r in range(height):
                dst = xp[(r + ph) * wp + pw : (r + ph) * wp + pw + width]
                xr = x[c, r]
                for j in range(width):
                    dst[j] = xr[j]
            last_c = c
        b0 = bias[m] if has_bias else f32(0.0)
        n = (oh - 1) * wp + ow  # junk columns j >= ow of ext are computed and dropped
        for p0 in range(0, n, _BLOCK):  # a block of ext stays in L1 across the taps
            p1 = min(n, p0 + _BLOCK)
            e = ext[p0:p1]
            for p in range(p1 - p0):
                e[p] = b0
            for a in range(kh):
                for b in range(kw):
                    wv = w[m, a, b]
                    off = a * dh * wp + b * dw
                    # slices, never offset indices: an offset index makes numba check for
                    # negative wrap-around and the loop stops vectorizing
                    if sh == 1 and sw == 1:
                        src = xp[off + p0 : off + p1]
                        for p in range(p1 - p0):
                            e[p] += src[p] * wv
                    elif sh == sw:
                        srcs = xp[off + sh * p0 : off + sh * (p1 - 1) + 1 : sh]
                        for p in range(p1 - p0):
                            e[p] += srcs[p] * wv
                    else:
                        for p in range(p0, p1):
                            i, j = p // wp, p % wp
                            if j < ow:
                                ext[p] += xp[i * sh * wp + j * sw + off] * wv
        for i in range(oh):
            orow = out[m, i]
            e = ext[i * wp : i * wp + ow]
            for j in range(ow):
                orow[j] = e[j]
            act_row(orow, code, f32(alpha), f32(beta), tmp, scratch)


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    group: int,
    out_hw: Sequence[int],
    act: int = 0,
    alpha: float = 0.0,
    beta: float = 0.0,
) -> np.ndarray:
    """act(conv(x, w) + bias): x (N, C, H, W), w (M, C/group, KH, KW) float32,
    pads (top, left, bottom, right) of which only top/left matter here (the output
    size out_hw already accounts for the rest) -> (N, M, OH, OW)."""
    n, c, height, width = x.shape
    m, cg, kh, kw = w.shape
    oh, ow = out_hw
    sh, sw = strides
    dh, dw = dilations
    ph, pw = pads[0], pads[1]
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32).reshape(-1)
    out = np.empty((n, m, oh, ow), dtype=np.float32)
    if cg == 1 and group == c and m % c == 0:
        wk = np.ascontiguousarray(w[:, 0], dtype=np.float32)
        for i in range(n):

            def planes(m0: int, m1: int, i: int = i) -> None:
                _depthwise(
                    x[i],
                    wk,
                    _NO_BIAS if b is None else b,
                    b is not None,
                    sh,
                    sw,
                    ph,
                    pw,
                    dh,
                    dw,
                    out[i],
                    m0,
                    m1,
                    act,
                    alpha,
                    beta,
                )

            parallel_for(planes, m, min_chunk=max(1, 8192 // max(oh * ow, 1)))
        return out
    mg = m // group
    wmat = w.reshape(group, mg, cg * kh * kw)
    if wmat.dtype != np.float32 or not wmat.flags.c_contiguous:
        wmat = np.ascontiguousarray(wmat, dtype=np.float32)
    pointwise = kh == kw == 1 and sh == sw == 1 and ph == pw == 0 and (oh, ow) == (height, width)
    for i in range(n):
        for g in range(group):
            y = out[i, g * mg : (g + 1) * mg].reshape(mg, oh * ow)
            bg = None if b is None else b[g * mg : (g + 1) * mg]
            if pointwise:
                _pointwise(
                    wmat[g], x[i, g * cg : (g + 1) * cg].reshape(cg, -1), y, bg, act, alpha, beta
                )
            else:
                _im2col_gemm(
                    x[i],
                    g * cg,
                    (g + 1) * cg,
                    wmat[g],
                    y,
                    bg,
                    (kh, kw),
                    (sh, sw),
                    (ph, pw),
                    (dh, dw),
                    ow,
                    act,
                    alpha,
                    beta,
                )
    return out


def _pointwise(
    wm: np.ndarray,
    xm: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> None:
    """y (M, P) = act(wm (M, C) @ xm (C, P) + bias per row)."""
    mg, p = y.shape
    if num_threads() == 1 or mg * p * wm.shape[1] < (1 << 18):
        np.matmul(wm, xm, out=y)
        epilogue(y, 0, p, bias, act, alpha, beta, row_bias=True)
    elif p >= mg:
        blocks = -(-p // 64)

        def cols(a: int, bb: int) -> None:
            p0, p1 = a * 64, min(bb * 64, p)
            np.matmul(wm, xm[:, p0:p1], out=y[:, p0:p1])
            epilogue(y, p0, p1, bias, act, alpha, beta, row_bias=True)

        parallel_for(cols, blocks)
    else:

        def rows(a: int, bb: int) -> None:
            np.matmul(wm[a:bb], xm, out=y[a:bb])
            epilogue(
                y[a:bb], 0, p, None if bias is None else bias[a:bb], act, alpha, beta, row_bias=True
            )

        parallel_for(rows, mg, min_chunk=4)


def _im2col_gemm(
    xi: np.ndarray,
    c0: int,
    c1: int,
    wm: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    k: tuple[int, int],
    s: tuple[int, int],
    p: tuple[int, int],
    d: tuple[int, int],
    ow: int,
    act: int,
    alpha: float,
    beta: float,
) -> None:
    """y (M, OH*OW) = act(wm (M, Cg*KH*KW) @ im2col(xi[c0:c1]) + bias), tiled by rows."""
    ck = wm.shape[1]
    oh = y.shape[1] // ow
    rows_per_tile = max(1, min(oh, _TILE_ELEMS // max(ck * ow, 1)))
    if num_threads() > 1:
        rows_per_tile = min(rows_per_tile, -(-oh // num_threads()))
    tiles = -(-oh // rows_per_tile)

    def run(t0: int, t1: int) -> None:
        cols = np.empty((ck, rows_per_tile * ow), dtype=np.float32)
        for t in range(t0, t1):
            i0, i1 = t * rows_per_tile, min((t + 1) * rows_per_tile, oh)
            width = (i1 - i0) * ow
            cm = cols[:, :width]
            _im2col_rows(xi, c0, c1, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], ow, i0, i1, cm)
            np.matmul(wm, cm, out=y[:, i0 * ow : i1 * ow])
            epilogue(y, i0 * ow, i1 * ow, bias, act, alpha, beta, row_bias=True)

    parallel_for(run, tiles)
