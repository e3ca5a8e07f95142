"""2-D MaxPool / AveragePool over NCHW float32 planes, the ResNet stem and
Inception-style pool layers.

The generic numpy handlers (ops/pool.py) pad the whole input and run one strided
elementwise pass per kernel tap; here each plane is read in place and padding is
handled by clipping every tap's range of output rows / columns, so nothing is
copied. Planes are split across the kernel thread pool.

- max, no indices: separable. Max is exact and associative, so each input row is
  first reduced over the kw horizontal taps into a scratch row, then every output
  row is the max of kh scratch rows (contiguous, vectorizable). A NaN anywhere in a
  window makes the result NaN, as np.maximum does in the generic path.
- max with Indices: per output pixel, taps in row-major order, a tap replaces the
  best only if strictly greater (the first maximum wins); tap 0 sets the start value
  even when it is a padding tap (value -inf), exactly as the generic path's padded
  view does.
- average: per output pixel, taps summed in row-major order into a float32
  accumulator (the generic path's order, so results are bit-identical), divided by
  the count of taps on real input (or on input-or-explicit-padding with
  count_include_pad, never the ceil_mode overhang past the end padding).
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import bounds, tuning
from onnxexec.kernels.conv.pool2d_kernels import avg2d, max2d, max2d_indices
from onnxexec.native import parallel as par

_SPAN_TAPS = tuning.POOL_SPAN_TAPS


def _planes(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> contiguous float32 flat (N*C*H*W) view or copy."""
    return np.ascontiguousarray(x, dtype=np.float32).reshape(-1)


def _geo(kernel, strides, dilations, pads_begin, pads_end) -> np.ndarray:
    return np.array(
        [*kernel, *strides, *dilations, *pads_begin, *pads_end], dtype=np.int64
    ).reshape(-1)


def _split(fn, n_planes: int, taps_per_plane: int) -> None:
    par.parallel_for(fn, n_planes, min_chunk=max(1, _SPAN_TAPS // max(taps_per_plane, 1)))


def _max_native(xp: np.ndarray, out: np.ndarray, geo: np.ndarray, shape: tuple, taps: int) -> bool:
    """The max pool as a native job over the plane range; False (nothing run) when
    single-threaded, too small to split, or the pool is busy."""
    from onnxexec.native.launch import run_job

    planes, h, w, oh, ow = shape
    threads = par.num_threads()
    parts = min(threads * par.SPANS_PER_THREAD, planes * taps // _SPAN_TAPS, par.MAX_SPANS)
    if threads == 1 or parts < 2:
        return False
    pool = par.native_pool()
    if pool is None:
        return False
    try:
        args = (xp.ctypes.data, out.ctypes.data, planes, h, w, oh, ow, *geo)
        spans = np.array([planes * k // parts for k in range(parts + 1)], dtype=np.int64)
        run_job(pool, par.KIND_POOL, args, 0.0, 0.0, spans)
    finally:
        pool.busy.release()
    return True


def max_pool2d(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    pads_begin: tuple[int, int],
    out_hw: tuple[int, int],
    want_indices: bool = False,
    storage_order: int = 0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Y (N, C, OH, OW) float32 and, when asked, Indices int64 (flat over the whole
    input, row-major for storage_order 0, column-major spatial for 1) of x (N, C, H, W)
    float32. Windows are placed at (i * s - pads_begin); the end padding is whatever
    out_hw implies (taps past the input are ignored).

    Preconditions (checked, ValueError otherwise: bounds.window2d): x 4-D, kernel,
    strides, dilations >= 1, pads >= 0, out_hw >= 0."""
    bounds.rank("max_pool2d", "X", x, 4)
    bounds.window2d("max_pool2d", x.shape, kernel, strides, dilations, pads_begin, out_hw)
    n, c, h, w = x.shape
    oh, ow = out_hw
    xp = _planes(x)
    out = np.empty((n * c, *out_hw), dtype=np.float32)
    geo = _geo(kernel, strides, dilations, pads_begin, (0, 0))
    per_plane = out_hw[0] * out_hw[1] * kernel[0] * kernel[1]
    if not want_indices:
        flat = out.reshape(-1)
        if not _max_native(xp, flat, geo, (n * c, h, w, oh, ow), per_plane):
            _split(lambda p0, p1: max2d(xp, h, w, geo, flat, oh, ow, p0, p1), n * c, per_plane)
        return out.reshape(n, c, *out_hw), None
    idx = np.empty(out.shape, dtype=np.int64)
    col = bool(storage_order)
    x3 = xp.reshape(n * c, h, w)
    _split(lambda p0, p1: max2d_indices(x3, geo, col, out, idx, p0, p1), n * c, per_plane)
    return out.reshape(n, c, *out_hw), idx.reshape(n, c, *out_hw)


def avg_pool2d(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    pads_begin: tuple[int, int],
    pads_end: tuple[int, int],
    out_hw: tuple[int, int],
    count_include_pad: bool = False,
) -> np.ndarray:
    """Y (N, C, OH, OW) float32 = window means of x (N, C, H, W) float32 (see module doc).

    Preconditions (checked, ValueError otherwise: bounds.window2d): x 4-D, kernel,
    strides, dilations >= 1, pads >= 0, out_hw >= 0."""
    bounds.rank("avg_pool2d", "X", x, 4)
    bounds.window2d("avg_pool2d", x.shape, kernel, strides, dilations, pads_begin, out_hw, pads_end)
    n, c, h, w = x.shape
    oh, ow = out_hw
    xp = _planes(x)
    out = np.empty((n * c, *out_hw), dtype=np.float32)
    geo = _geo(kernel, strides, dilations, pads_begin, pads_end)
    inc = bool(count_include_pad)
    per_plane = out_hw[0] * out_hw[1] * kernel[0] * kernel[1]
    flat = out.reshape(-1)
    _split(lambda p0, p1: avg2d(xp, h, w, geo, inc, flat, oh, ow, p0, p1), n * c, per_plane)
    return out.reshape(n, c, *out_hw)
