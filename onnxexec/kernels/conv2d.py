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
from dataclasses import dataclass

import numba as nb
import numpy as np

from onnxexec.kernels.activations import act_row, epilogue
from onnxexec.kernels.parallel import num_threads, parallel_for

f32 = np.float32
_TILE_ELEMS = 1 << 19  # floats per im2col tile (2 MiB)
_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1), dtype=np.float32)
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
def _im2col_wide(xp, c0, c1, kh, kw, dh, dw, i0, i1, cols):
    """Stride-1 im2col at the padded width wp: cols[(c, a, b), (i - i0) * wp + j] =
    xp[c, i + a*dh, j + b*dw] for all j < wp (columns j >= OW are junk, dropped later),
    so each row of cols is one contiguous copy."""
    wp = xp.shape[2]
    n = (i1 - i0) * wp
    for c in range(c0, c1):
        plane = xp[c].reshape(-1)
        for a in range(kh):
            for b in range(kw):
                start = (i0 + a * dh) * wp + b * dw
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
    z: np.ndarray | None = None,
) -> np.ndarray:
    """act(conv(x, w) + bias + z): x (N, C, H, W), w (M, C/group, KH, KW) float32, z an
    optional (N, M, OH, OW) residual; pads (top, left, ...) of which only top/left matter
    (out_hw already accounts for the rest) -> (N, M, OH, OW)."""
    n, c, height, width = x.shape
    m, cg, kh, kw = w.shape
    oh, ow = out_hw
    geo = Geo(kh, kw, strides[0], strides[1], pads[0], pads[1], dilations[0], dilations[1], ow)
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = None if bias is None else np.ascontiguousarray(bias, dtype=np.float32).reshape(-1)
    zc = None if z is None else np.ascontiguousarray(z, dtype=np.float32)
    out = np.empty((n, m, oh, ow), dtype=np.float32)
    if cg == 1 and group == c and m % c == 0:
        _depthwise_all(x, w, b, geo, out, act if zc is None else 0, alpha, beta)
        if zc is not None:
            out += zc
            epilogue(out.reshape(-1, oh * ow), 0, oh * ow, None, act, alpha, beta)
        return out
    mg = m // group
    wmat = w.reshape(group, mg, cg * kh * kw)
    if wmat.dtype != np.float32 or not wmat.flags.c_contiguous:
        wmat = np.ascontiguousarray(wmat, dtype=np.float32)
    pointwise = (
        kh == kw == 1
        and geo.sh == geo.sw == 1
        and geo.ph == geo.pw == 0
        and (oh, ow) == (height, width)
    )
    for i in range(n):
        xp = _padded(x[i], geo, oh) if not pointwise and geo.sh == geo.sw == 1 else None
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
            if pointwise:
                _pointwise(wmat[g], x[i, c0:c1].reshape(cg, -1), y, ep)
            elif xp is not None:
                _wide_gemm(xp, c0, c1, wmat[g], y, geo, ep)
            else:
                _im2col_gemm(x[i], c0, c1, wmat[g], y, geo, ep)
    return out


@dataclass(frozen=True)
class Geo:
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int
    ow: int


@dataclass(frozen=True)
class Epi:
    """What happens to a finished output tile: + bias per channel (+ z), activation."""

    bias: np.ndarray | None
    act: int
    alpha: float
    beta: float
    z: np.ndarray | None

    def apply(self, y: np.ndarray, n0: int, n1: int, rows: slice = slice(None)) -> None:
        epilogue(
            y[rows],
            n0,
            n1,
            None if self.bias is None else self.bias[rows],
            self.act,
            self.alpha,
            self.beta,
            row_bias=True,
            z=None if self.z is None else self.z[rows],
        )


def _depthwise_all(x, w, b, geo: Geo, out, act, alpha, beta) -> None:
    wk = np.ascontiguousarray(w[:, 0], dtype=np.float32)
    m, oh, ow = out.shape[1:]
    for i in range(x.shape[0]):

        def planes(m0: int, m1: int, i: int = i) -> None:
            _depthwise(
                x[i],
                wk,
                _NO_BIAS if b is None else b,
                b is not None,
                geo.sh,
                geo.sw,
                geo.ph,
                geo.pw,
                geo.dh,
                geo.dw,
                out[i],
                m0,
                m1,
                act,
                alpha,
                beta,
            )

        parallel_for(planes, m, min_chunk=max(1, 8192 // max(oh * ow, 1)))


def _pointwise(wm: np.ndarray, xm: np.ndarray, y: np.ndarray, ep: Epi) -> None:
    """y (M, P) = epilogue(wm (M, C) @ xm (C, P))."""
    mg, p = y.shape
    if num_threads() == 1 or mg * p * wm.shape[1] < (1 << 18):
        np.matmul(wm, xm, out=y)
        ep.apply(y, 0, p)
    elif p >= mg:
        blocks = -(-p // 64)

        def cols(a: int, bb: int) -> None:
            p0, p1 = a * 64, min(bb * 64, p)
            np.matmul(wm, xm[:, p0:p1], out=y[:, p0:p1])
            ep.apply(y, p0, p1)

        parallel_for(cols, blocks)
    else:

        def rows(a: int, bb: int) -> None:
            np.matmul(wm[a:bb], xm, out=y[a:bb])
            ep.apply(y, 0, p, slice(a, bb))

        parallel_for(rows, mg, min_chunk=4)


def _tiles(ck: int, width: int, oh: int) -> int:
    """Output rows per im2col tile: a column matrix of about _TILE_ELEMS floats."""
    rows = max(1, min(oh, _TILE_ELEMS // max(ck * width, 1)))
    if num_threads() > 1:
        rows = min(rows, -(-oh // (2 * num_threads())))
    return max(rows, 1)


def _padded(xi: np.ndarray, geo: Geo, oh: int) -> np.ndarray:
    """xi (C, H, W) zero-padded to (C, hp, wp) with room for the junk columns' reads."""
    c, height, width = xi.shape
    wp = max(width + geo.pw, (geo.ow - 1) + (geo.kw - 1) * geo.dw + 1)
    hp = max(height + geo.ph, oh + (geo.kh - 1) * geo.dh) + 1
    xp = np.zeros((c, hp, wp), dtype=np.float32)
    xp[:, geo.ph : geo.ph + height, geo.pw : geo.pw + width] = xi
    return xp


def _wide_gemm(
    xp: np.ndarray, c0: int, c1: int, wm: np.ndarray, y: np.ndarray, geo: Geo, ep: Epi
) -> None:
    """Stride-1 conv: im2col at the padded width (one contiguous copy per column-matrix
    row), one sgemm per tile into a wide buffer, then compaction + epilogue into y."""
    ck = wm.shape[1]
    wp = xp.shape[2]
    ow = geo.ow
    oh = y.shape[1] // ow
    rows_per_tile = _tiles(ck, wp, oh)
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
            _im2col_wide(xp, c0, c1, geo.kh, geo.kw, geo.dh, geo.dw, i0, i1, cm)
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
    rows_per_tile = _tiles(ck, ow, oh)
    tiles = -(-oh // rows_per_tile)

    def run(t0: int, t1: int) -> None:
        cols = np.empty((ck, rows_per_tile * ow), dtype=np.float32)
        for t in range(t0, t1):
            i0, i1 = t * rows_per_tile, min((t + 1) * rows_per_tile, oh)
            cm = cols[:, : (i1 - i0) * ow]
            _im2col_rows(
                xi,
                c0,
                c1,
                geo.kh,
                geo.kw,
                geo.sh,
                geo.sw,
                geo.ph,
                geo.pw,
                geo.dh,
                geo.dw,
                ow,
                i0,
                i1,
                cm,
            )
            np.matmul(wm, cm, out=y[:, i0 * ow : i1 * ow])
            ep.apply(y, i0 * ow, i1 * ow)

    parallel_for(run, tiles)
