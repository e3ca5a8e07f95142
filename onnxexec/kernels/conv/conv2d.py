"""2-D float32 convolution for the fused Conv op, bias and activation included.

- depthwise (one input channel per group): kernels/conv/depthwise.py's direct kernel.
- KxK with the weight stored OHWI (passes/conv_layout.py) on AVX-512 hosts,
  stride 1 or cheap phase planes (conv_direct.use_direct): kernels/conv/conv_direct.py,
  register-blocked tiles over every tap and channel reading the planes in place.
- KxK with the weight stored OHWI, fewer output pixels than
  channels (conv_rows.use_rows: ResNet's 14x14 / 7x7 stages): an im2row matrix built
  from an HWC copy of the input, then one sgemm against it whose weight rows are split
  across threads (kernels/conv/conv_rows.py, kernels/conv/conv_gemm.py).
- KxK OHWI with enough input channels and output width (conv_taps.use_taps):
  kernels/conv/conv_taps.py, one sgemm per kernel tap reading the padded input in place.
- 1x1 without padding: one matrix product W (M, C) @ X (C, H*W) per image and group
  (a strided one on the subsampled input), split over output columns or channels
  (kernels/conv/conv_gemm.py).
- output rows of >= _WIDE_MIN_OW, stride 1 or a kernel over 3x3 (ResNet's 7x7 stem):
  im2col at the padded width of the input split by stride phase (one contiguous copy
  per column-matrix row), junk columns dropped after the sgemm. A strided 3x3 does
  better with the gathering im2col below (no phase split, no compaction pass).
- anything else: im2col in tiles of whole output rows (each tile's column matrix
  stays around 2 MiB) and one sgemm per tile into the output's columns; tiles are
  split across threads, each building its own column matrix. When there are fewer
  output pixels than channels (deep layers) the column matrix is built once and the
  threads split the output channels instead, so no thread repacks the whole weight.

Every path finishes the output with the epilogue (bias per channel + residual +
activation) while the tile is hot. References: onnxexec.ops.conv.conv_nd (the unfused
op); tests/unit/kernels/conv/test_conv2d.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onnxexec.kernels import bounds, tuning
from onnxexec.kernels import objload as nb
from onnxexec.kernels.conv.conv_direct import conv_direct, use_direct
from onnxexec.kernels.conv.conv_gemm import PARALLEL_MACS, Epi, Geo, pointwise, rows_conv
from onnxexec.kernels.conv.conv_rows import use_rows
from onnxexec.kernels.conv.conv_taps import conv_taps, phase_planes, use_taps
from onnxexec.kernels.conv.depthwise import depthwise2d_fused
from onnxexec.kernels.conv.im2col_job import IM_ARGS, im2col_rows
from onnxexec.kernels.conv.layout import WeightLayout, layout_of
from onnxexec.kernels.conv.pointwise_small import Panels, conv1x1_small, use_small
from onnxexec.kernels.linalg import blas
from onnxexec.kernels.math.activations import act_row
from onnxexec.native.parallel import (
    ARGS,
    KIND_IM2COL,
    MAX_SPANS,
    native_pool,
    num_threads,
    parallel_for,
)

f32 = np.float32
_TILE_ELEMS = tuning.IM2COL_TILE_FLOATS  # floats per im2col tile (2 MiB)
_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1), dtype=np.float32)
_WIDE_MIN_OW = tuning.CONV_WIDE_MIN_OW


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _im2col_wide(xq, c0, c1, kh, kw, sh, sw, dh, dw, i0, i1, cols):
    """im2col at the phase-plane width wq from xq (sh * sw, C, hq, wq) (conv_taps.
    phase_planes): cols[(c, a, b), (i - i0) * wq + j] = tap (a, b)'s plane at row
    i + (a*dh) // sh, column j + (b*dw) // sw, for all j < wq (columns j >= OW are
    junk, dropped later), so each row of cols is one contiguous copy."""
    wq = xq.shape[3]
    n = (i1 - i0) * wq
    for c in range(c0, c1):
        for a in range(kh):
            for b in range(kw):
                ra, cb = a * dh, b * dw
                plane = xq[(ra % sh) * sw + cb % sw, c].reshape(-1)
                start = (i0 + ra // sh) * wq + cb // sw
                src = plane[start : start + n]
                dst = cols[((c - c0) * kh + a) * kw + b]
                for q in range(n):
                    dst[q] = src[q]


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _compact(ext, wp, rows, y, col0, ow, bias, has_bias, z, has_z, code, alpha, beta):
    """y[m, col0 + i*ow + j] = act(ext[m, i*wp + j] + bias[m] (+ z[m, same])), i < rows."""
    tmp = np.empty(ow, dtype=np.float32)
    scratch = np.empty(ow, dtype=np.int32)
    a = f32(alpha)
    b = f32(beta)
    for r in range(ext.shape[0]):
        b0 = bias[r] if has_bias else f32(0.0)
        for i in range(rows):
            src = ext[r, i * wp : i * wp + ow]
            dst = y[r, col0 + i * ow : col0 + (i + 1) * ow]
            if has_z:
                zz = z[r, col0 + i * ow : col0 + (i + 1) * ow]
                for j in range(ow):
                    dst[j] = src[j] + b0 + zz[j]
            else:
                for j in range(ow):
                    dst[j] = src[j] + b0
            act_row(dst, code, a, b, tmp, scratch)


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
    z: np.ndarray | None = None,
    panels: Panels | None = None,
    layout: WeightLayout | None = None,
) -> np.ndarray:
    """act(conv(x, w) + bias + z): x (N, C, H, W), w (M, C/group, KH, KW) float32, z an
    optional (N, M, OH, OW) residual; pads (top, left, ...) of which only top/left matter
    (out_hw already accounts for the rest) -> (N, M, OH, OW). `panels`: a 1x1 w's packed
    panels the caller keeps (kernels/conv/pointwise_small.py), for the small-output path.
    `layout`: w's storage as planned (kernels/conv/layout.py); None: read from w here.

    Preconditions (checked, ValueError otherwise: bounds.conv2d_args): x, w 4-D with
    C == Cg * group and M % group == 0; strides, dilations >= 1; pads >= 0; out_hw
    >= 0; bias None or M values; z None or (N, M, OH, OW); a non-empty output needs a
    non-empty input. A zero-size output returns without running any kernel."""
    bounds.conv2d_args(x, w, bias, strides, pads, dilations, group, out_hw, z)
    n, c, height, width = x.shape
    m, cg, kh, kw = w.shape
    oh, ow = out_hw
    if x.dtype != f32 or not x.flags.c_contiguous:
        x = np.ascontiguousarray(x, dtype=f32)
    b = None if bias is None else _f32(bias).reshape(-1)
    zc = None if z is None else _f32(z)
    out = np.empty((n, m, oh, ow), dtype=f32)
    if out.size == 0:
        return out
    if w.dtype != f32:  # order="K" keeps an OHWI layout
        w = w.astype(f32, order="K")
    taps = (layout_of(w) if layout is None else layout) is WeightLayout.OHWI
    if cg == 1 and group == c and m % c == 0:
        return depthwise2d_fused(x, w, b, strides, pads, dilations, out, act, alpha, beta, zc)
    mg = m // group
    sh, sw = strides[0], strides[1]
    geo = Geo(kh, kw, sh, sw, pads[0], pads[1], dilations[0], dilations[1], ow)
    if use_direct(cg, kh, kw, sh, sw, height, width) and taps:
        wo = w.transpose(0, 2, 3, 1)  # (M, KH, KW, Cg), C-contiguous
        for i in range(n):
            for g in range(group):
                sl = slice(g * mg, (g + 1) * mg)
                conv_direct(
                    x[i], g * cg, (g + 1) * cg, wo[sl], out[i, sl].reshape(mg, oh * ow),
                    strides, pads[:2], dilations, out_hw, None if b is None else b[sl],
                    None if zc is None else zc[i, sl].reshape(mg, oh * ow), act, alpha, beta,
                )  # fmt: skip
        return out
    if use_rows(cg, mg, oh * ow, kh, kw) and taps:
        wo = w.transpose(0, 2, 3, 1).reshape(m, kh * kw * cg)  # C-contiguous: no copy
        for i in range(n):
            for g in range(group):
                sl = slice(g * mg, (g + 1) * mg)
                y = out[i, sl].reshape(mg, oh * ow)
                zg = None if zc is None else zc[i, sl].reshape(mg, oh * ow)
                ep = Epi(None if b is None else b[sl], act, alpha, beta, zg)
                rows_conv(x[i], g * cg, (g + 1) * cg, wo[sl], y, geo, oh, ep)
        return out
    if use_taps(cg, ow, kh, kw) and taps:
        wo = w.transpose(0, 2, 3, 1)  # (M, KH, KW, Cg), C-contiguous
        for i in range(n):
            for g in range(group):
                sl = slice(g * mg, (g + 1) * mg)
                xq = phase_planes(
                    x[i], g * cg, (g + 1) * cg, (kh, kw), strides, pads[:2], dilations, out_hw
                )
                conv_taps(
                    xq, wo[sl], out[i, sl].reshape(mg, oh * ow), strides, dilations, out_hw,
                    None if b is None else b[sl],
                    None if zc is None else zc[i, sl].reshape(mg, oh * ow),
                    act, alpha, beta,
                )  # fmt: skip
        return out
    if kh == kw == 1 and not any(pads[:2]) and (oh - 1) * sh < height and (ow - 1) * sw < width:
        if (oh, ow) != (height, width):  # strided: subsample, then the same product
            x = np.ascontiguousarray(x[:, :, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw])
        if group == 1 and use_small(c, m, oh * ow, act):
            return conv1x1_small(x, w, b, zc, out, act, alpha, beta, panels)
        wmat = _f32(w.reshape(group, mg, cg))
        # pointwise: no im2col, one product per image and group
        for i in range(n):
            for g in range(group):
                c0, m0 = g * cg, g * mg
                pointwise(
                    wmat[g],
                    x[i, c0 : c0 + cg].reshape(cg, oh * ow),
                    out[i, m0 : m0 + mg].reshape(mg, oh * ow),
                    None if b is None else b[m0 : m0 + mg],
                    None if zc is None else zc[i, m0 : m0 + mg].reshape(mg, oh * ow),
                    act,
                    alpha,
                    beta,
                )
        return out
    wmat = _f32(w.reshape(group, mg, cg * kh * kw))
    for i in range(n):
        xq = (
            phase_planes(x[i], 0, c, (kh, kw), strides, pads[:2], dilations, out_hw)
            if ow >= _WIDE_MIN_OW and (sh == sw == 1 or kh * kw > 9)
            else None
        )
        for g in range(group):
            sl = slice(g * mg, (g + 1) * mg)
            y = out[i, sl].reshape(mg, oh * ow)
            ep = Epi(
                None if b is None else b[sl],
                act,
                alpha,
                beta,
                None if zc is None else zc[i, sl].reshape(mg, oh * ow),
            )
            c0, c1 = g * cg, (g + 1) * cg
            if xq is not None:
                _wide_gemm(xq, c0, c1, wmat[g], y, geo, ep)
            else:
                _im2col_gemm(x[i], c0, c1, wmat[g], y, geo, ep)
    return out


def _f32(a: np.ndarray) -> np.ndarray:
    if a.dtype == f32 and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a, dtype=f32)


def _tiles(ck: int, width: int, oh: int, mg: int) -> int:
    """Output rows per im2col tile: a column matrix of about _TILE_ELEMS floats, and
    at least two tiles per thread when the conv is worth splitting."""
    rows = max(1, min(oh, _TILE_ELEMS // max(ck * width, 1)))
    if num_threads() > 1 and mg * ck * oh * width >= PARALLEL_MACS:
        rows = min(rows, -(-oh // (2 * num_threads())))
    return max(rows, 1)


def _wide_gemm(
    xq: np.ndarray, c0: int, c1: int, wm: np.ndarray, y: np.ndarray, geo: Geo, ep: Epi
) -> None:
    """im2col at the phase-plane width (one contiguous copy per column-matrix row), one
    sgemm per tile into a wide buffer, then compaction + epilogue into y."""
    ck = wm.shape[1]
    wp = xq.shape[3]
    ow = geo.ow
    oh = y.shape[1] // ow
    rows_per_tile = _tiles(ck, wp, oh, wm.shape[0])
    tiles = -(-oh // rows_per_tile)
    has_b, has_z = ep.bias is not None, ep.z is not None
    bias = _NO_BIAS if ep.bias is None else ep.bias
    z = _NO_Z if ep.z is None else ep.z

    def run(t0: int, t1: int) -> None:
        cols = np.empty((ck, rows_per_tile * wp), dtype=np.float32)
        ext = np.empty((wm.shape[0], rows_per_tile * wp), dtype=np.float32)
        for t in range(t0, t1):
            i0, i1 = t * rows_per_tile, min((t + 1) * rows_per_tile, oh)
            width = (i1 - i0) * wp
            cm, em = cols[:, :width], ext[:, :width]
            _im2col_wide(xq, c0, c1, geo.kh, geo.kw, geo.sh, geo.sw, geo.dh, geo.dw, i0, i1, cm)
            np.matmul(wm, cm, out=em)
            _compact(
                em, wp, i1 - i0, y, i0 * ow, ow, bias, has_b, z, has_z, ep.act, ep.alpha, ep.beta
            )

    parallel_for(run, tiles)


def _im2col_gemm(
    xi: np.ndarray, c0: int, c1: int, wm: np.ndarray, y: np.ndarray, geo: Geo, ep: Epi
) -> None:
    """y (M, OH*OW) = epilogue(wm (M, Cg*KH*KW) @ im2col(xi[c0:c1])), tiled by rows."""
    ck = wm.shape[1]
    ow = geo.ow
    oh = y.shape[1] // ow
    mg, p = y.shape
    if num_threads() > 1 and p < mg and mg * ck * p >= PARALLEL_MACS:
        # few pixels, many channels (deep layers): tiles by rows would each repack the
        # whole weight matrix, so build the column matrix once and split the channels
        cols = np.empty((ck, p), dtype=np.float32)
        im2col_rows(
            xi, c0, c1, geo.kh, geo.kw, geo.sh, geo.sw, geo.ph, geo.pw, geo.dh, geo.dw,
            ow, 0, oh, cols,
        )  # fmt: skip

        def chans(a: int, b: int) -> None:
            np.matmul(wm[a:b], cols, out=y[a:b])
            ep.apply(y, 0, p, slice(a, b))

        parallel_for(chans, mg, min_chunk=16)
        return
    rows_per_tile = _tiles(ck, ow, oh, mg)
    tiles = -(-oh // rows_per_tile)
    if tiles > 1 and _im2col_native(xi, c0, c1, wm, y, geo, ep, rows_per_tile, tiles):
        return

    def run(t0: int, t1: int) -> None:
        cols = np.empty((ck, rows_per_tile * ow), dtype=np.float32)
        for t in range(t0, t1):
            i0, i1 = t * rows_per_tile, min((t + 1) * rows_per_tile, oh)
            cm = cols[:, : (i1 - i0) * ow]
            im2col_rows(
                xi, c0, c1, geo.kh, geo.kw, geo.sh, geo.sw, geo.ph, geo.pw, geo.dh, geo.dw,
                ow, i0, i1, cm,
            )  # fmt: skip
            np.matmul(wm, cm, out=y[:, i0 * ow : i1 * ow])
            ep.apply(y, i0 * ow, i1 * ow)

    parallel_for(run, tiles)


def _im2col_native(
    xi: np.ndarray,
    c0: int,
    c1: int,
    wm: np.ndarray,
    y: np.ndarray,
    geo: Geo,
    ep: Epi,
    rows: int,
    tiles: int,
) -> bool:
    """_im2col_gemm's row tiles as a native job (im2col_job.im2col_span): the workers
    run them without the GIL. False when single-threaded, the pool is busy, there is
    no sgemm, or an operand isn't a C-contiguous float32 array."""
    fn = blas.SGEMM
    ok = fn and num_threads() > 1 and xi.flags.c_contiguous and wm.flags.c_contiguous
    ok = ok and y.flags.c_contiguous and (ep.z is None or ep.z.flags.c_contiguous)
    pool = native_pool() if ok else None
    if pool is None:
        return False
    try:
        bias = None if ep.bias is None else np.ascontiguousarray(ep.bias, dtype=np.float32)
        pool.ctrl[ARGS : ARGS + IM_ARGS] = (
            fn, xi.ctypes.data, *xi.shape, c0, c1, geo.kh, geo.kw, geo.sh, geo.sw,
            geo.ph, geo.pw, geo.dh, geo.dw, y.shape[1] // geo.ow, geo.ow, wm.ctypes.data,
            y.shape[0], y.ctypes.data, 0 if bias is None else bias.ctypes.data,
            0 if ep.z is None else ep.z.ctypes.data, ep.act, rows,
        )  # fmt: skip
        pool.fctrl[0], pool.fctrl[1] = ep.alpha, ep.beta
        parts = min(tiles, MAX_SPANS)
        spans = np.array([tiles * k // parts for k in range(parts + 1)], dtype=np.int64)
        pool.run_native(KIND_IM2COL, spans)
    finally:
        pool.busy.release()
    return True
