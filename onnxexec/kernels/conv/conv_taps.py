"""KxK float32 convolution as one GEMM per kernel tap, without an im2col matrix.

For stride 1 the zero-padded input plane, read at an offset, *is* the column matrix
of one tap: with the output computed at the padded width wq (columns j >= OW are
junk, dropped on the way out), output pixel q = i * wq + j of tap (a, b) reads
xpad[c, q + a * wq + b] for every channel c, a (Cg, n) matrix with row stride
hq * wq. So y_ext (M, n) = sum over taps of W[:, a, b, :] (M, Cg) @ that matrix,
each a BLAS sgemm accumulating into the same output tile (beta = 1), and nothing is
copied but the padded input. A stride s > 1 first splits the padded input into
s * s phase planes (plane (u, v) holds xpad[R * s + u, T * s + v]), after which each
tap again reads one plane at an offset (kernels/conv/depthwise.py does the same).

The weight must be stored "OHWI" (M, KH, KW, Cg) so that each tap's (M, Cg) matrix
is a strided BLAS operand; the ORT_ENABLE_ALL pass passes/conv_layout.py stores
constant weights that way (as an (M, Cg, KH, KW) view, so the op's semantics stay).

Against im2col + one sgemm this saves the column-matrix copy (9x the input for 3x3)
at the price of KH*KW sgemm calls with K = Cg: worth it when Cg and the output width
are large enough for those products to run at full speed (see `use_taps`). With 2+
threads the tiles of output rows (or, for few rows, ranges of channels) are a native
job of the pool (kernels/conv/taps_job.py holds the tile kernels and the span).
References: tests/unit/kernels/conv/test_conv_taps.py (float64 numpy conv).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels import tuning
from onnxexec.kernels.conv.layout import WeightLayout, layout_of
from onnxexec.kernels.conv.taps_job import TAPS_ARGS, taps_span_run
from onnxexec.kernels.linalg import blas
from onnxexec.kernels.math.activations import act_row
from onnxexec.native.parallel import ARGS, KIND_TAPS, MAX_SPANS, native_pool, num_threads

f32 = np.float32
U = np.uint64
_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1), dtype=np.float32)
_MIN_CG = tuning.CONV_TAPS_MIN_CG  # input channels per group below which K = Cg products run slowly
_MIN_OW = tuning.CONV_TAPS_MIN_OW
_TILE_FLOATS = tuning.CONV_TAPS_TILE_FLOATS  # output tile (M x rows * wq) kept around 256 KiB
_PARALLEL_MACS = tuning.CONV_TAPS_PARALLEL_MACS  # smaller convs stay on one thread
TAP_SPANS = 2  # spans per thread


def ohwi(w: np.ndarray) -> bool:
    """Whether w (M, Cg, KH, KW) is a view of an (M, KH, KW, Cg) C-contiguous array."""
    return layout_of(w) is WeightLayout.OHWI


def to_ohwi(w: np.ndarray) -> np.ndarray:
    """w (M, Cg, KH, KW) re-stored OHWI, returned as the same-shaped view."""
    return np.ascontiguousarray(w.transpose(0, 2, 3, 1), dtype=f32).transpose(0, 3, 1, 2)


def use_taps(cg: int, ow: int, kh: int, kw: int) -> bool:
    """Whether the tap-GEMM path beats im2col for this shape (measured on ResNet-50)."""
    return bool(blas.SGEMM) and kh * kw > 1 and cg >= _MIN_CG and ow >= _MIN_OW


@nb.njit(nogil=True, cache=True, error_model="numpy")
def split_phases(x, c0, c1, ph, pw, sh, sw, xq):
    """xq[(u * sw + v), c - c0, R, T] = x[c, R * sh + u - ph, T * sw + v - pw] (xq zeroed).

    uint64 indices (U): a signed index makes numba test for negative wrap-around on
    every access, which keeps LLVM from vectorizing the copies (the stems' split 60 ->
    29 us); stride 2's columns are deinterleaved in one pass, as in
    kernels/conv/depthwise_planes.py."""
    height, width = x.shape[1], x.shape[2]
    hq, wq = xq.shape[2], xq.shape[3]
    plane = U(hq * wq)
    chan = U(c1 - c0) * plane  # floats between phase planes
    flat = xq.reshape(-1)
    half, odd = width // 2, width % 2
    for c in range(c0, c1):
        xs = x[c].reshape(-1)
        cb = U(c - c0) * plane
        for r in range(height):
            rr = r + ph
            base = U((rr % sh) * sw) * chan + cb + U((rr // sh) * wq)
            s0 = U(r * width)
            if sw == 1:
                d0 = base + U(pw)
                for t in range(width):
                    flat[d0 + U(t)] = xs[s0 + U(t)]
            elif sw == 2:
                d0 = base + U(pw % 2) * chan + U(pw // 2)
                d1 = base + U((pw + 1) % 2) * chan + U((pw + 1) // 2)
                for k in range(half):
                    flat[d0 + U(k)] = xs[s0 + U(2) * U(k)]
                    flat[d1 + U(k)] = xs[s0 + U(2) * U(k) + U(1)]
                if odd:
                    flat[d0 + U(half)] = xs[s0 + U(width - 1)]
            else:
                for col in range(width):
                    pc = col + pw
                    flat[base + U(pc % sw) * chan + U(pc // sw)] = xs[s0 + U(col)]


def phase_planes(
    xi: np.ndarray,
    c0: int,
    c1: int,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
    tail: int = 0,
    own: bool = False,
) -> np.ndarray:
    """Channels [c0, c1) of xi (C, H, W) zero-padded and split by stride phase:
    (sh * sw, c1 - c0, hq, wq), with room for the junk columns' reads (and `tail`
    more floats after the last plane, for kernels that read past it).

    The planes are this thread's scratch for this geometry, valid until its next
    phase_planes call of the same geometry: the split writes the same interior every
    time, so the zero border is made once (zeroing 0.2-1.8 MB a call was a third of
    a split, with the other thread idle). `own`: new planes of the caller's own."""
    height, width = xi.shape[1:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = kernel, strides, pads, dilations, out_hw
    wq = max(-(-(width + pw) // sw), ow + (kw - 1) * dw // sw)
    hq = max(-(-(height + ph) // sh), oh + (kh - 1) * dh // sh) + 1
    size = sh * sw * (c1 - c0) * hq * wq
    key = (height, width, c1 - c0, ph, pw, sh, sw, hq, wq, tail)
    buf = np.zeros(size + tail, dtype=f32) if own else _zeroed(key, size + tail)
    xq = buf[:size].reshape(sh * sw, c1 - c0, hq, wq)
    split_phases(xi, c0, c1, ph, pw, sh, sw, xq)
    return xq


_scratch = threading.local()
_SCRATCH_BYTES = 1 << 25  # a thread's phase planes, all geometries: past this, start over


def _zeroed(key: tuple[int, ...], n: int) -> np.ndarray:
    """This thread's zero-initialized float32 scratch of n floats for `key`."""
    bufs: dict[tuple[int, ...], np.ndarray] | None = getattr(_scratch, "bufs", None)
    if bufs is None:
        bufs = _scratch.bufs = {}
    buf = bufs.get(key)
    if buf is None:
        if sum(b.nbytes for b in bufs.values()) + 4 * n > _SCRATCH_BYTES:
            bufs.clear()
        buf = bufs[key] = np.zeros(n, dtype=f32)
    return buf


def conv_taps(
    xq: np.ndarray,
    w: np.ndarray,
    y: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> None:
    """y (M, OH*OW) = act(conv + bias[:, None] + z) for phase planes xq (phase_planes) and
    w (M, KH, KW, Cg) C-contiguous; output rows (or, for few rows, channels) are split
    across the thread pool."""
    m, kh, kw, cg = w.shape
    oh, ow = out_hw
    wq = xq.shape[3]
    geo = (kh, kw, strides[0], strides[1], dilations[0], dilations[1], ow)
    has_b, has_z = bias is not None, z is not None
    bb = _NO_BIAS if bias is None else bias
    zz = _NO_Z if z is None else z
    fn = blas.SGEMM
    rpt = max(1, min(oh, _TILE_FLOATS // max(1, m * wq)))
    threads = num_threads()
    if threads == 1 or m * cg * kh * kw * oh * ow < _PARALLEL_MACS:
        tiles = -(-oh // rpt)
        taps_span_run(
            fn, xq, w, 0, m, geo, oh, 0, tiles, rpt, y, bb, has_b, zz, has_z, act, alpha, beta
        )
        return
    spans = TAP_SPANS * threads
    chans = oh < spans  # few output rows: split the channels (in 16s) instead
    if chans:
        units = -(-m // 16)
        parts = min(units, spans, MAX_SPANS)
        bounds = [units * k // parts * 16 for k in range(parts)] + [m]
    else:
        rpt = min(rpt, -(-oh // spans))
        tiles = -(-oh // rpt)
        parts = min(tiles, MAX_SPANS)
        bounds = [tiles * k // parts for k in range(parts + 1)]
    pool = native_pool()
    if pool is not None:
        try:
            pool.ctrl[ARGS : ARGS + TAPS_ARGS] = (
                fn, xq.ctypes.data, *xq.shape, w.ctypes.data, m, kh, kw, *geo[2:6], oh, ow,
                rpt, y.ctypes.data, 0 if bias is None else bias.ctypes.data,
                0 if z is None else z.ctypes.data, act, int(chans),
            )  # fmt: skip
            pool.fctrl[0], pool.fctrl[1] = alpha, beta
            pool.run_native(KIND_TAPS, np.array(bounds, dtype=np.int64))
        finally:
            pool.busy.release()
        return
    # the pool is busy (another session's job): the same spans on this thread
    t_all = -(-oh // rpt)
    for k in range(len(bounds) - 1):
        m0, m1, t0, t1 = (
            (bounds[k], bounds[k + 1], 0, t_all) if chans else (0, m, *bounds[k : k + 2])
        )
        taps_span_run(
            fn, xq, w, m0, m1, geo, oh, t0, t1, rpt, y, bb, has_b, zz, has_z, act, alpha, beta
        )


@nb.njit(nogil=True, cache=True, error_model="numpy")
def pointwise_span(fn, w, x, y, bias, has_b, z, has_z, code, al, be, m0, m1, p0, p1):
    """The 1x1 conv (the single-tap case): y[m0:m1, p0:p1] = act(w[m0:m1] @ x[:, p0:p1]
    + bias[m0:m1, None] + z[m0:m1, p0:p1]) with w (M, C), x (C, P), y / z (M, P)
    C-contiguous float32: one sgemm and the epilogue in one call (a thread's span
    costs one GIL hand-off, not one per numpy call)."""
    c, p = x.shape
    if m1 <= m0 or p1 <= p0:
        return
    blas.sgemm(
        fn, blas.NO_TRANS, m1 - m0, p1 - p0, c, w.ctypes.data + 4 * m0 * c, c,
        x.ctypes.data + 4 * p0, p, y.ctypes.data + 4 * (m0 * p + p0), p, f32(0.0),
    )  # fmt: skip
    if not (has_b or has_z or code):
        return
    tmp = np.empty(p1 - p0, dtype=np.float32)
    scratch = np.empty(p1 - p0, dtype=np.int32)
    a32, b32 = f32(al), f32(be)
    for m in range(m0, m1):
        row = y[m, p0:p1]
        if has_b:
            bv = bias[m]
            for j in range(p1 - p0):
                row[j] += bv
        if has_z:
            zr = z[m, p0:p1]
            for j in range(p1 - p0):
                row[j] += zr[j]
        act_row(row, code, a32, b32, tmp, scratch)
