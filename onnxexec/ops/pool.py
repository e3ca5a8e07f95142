"""AveragePool, MaxPool, LpPool and their Global* forms, MaxUnpool.

Each pool is a loop over the few kernel taps of a strided window view, each step a
vectorized elementwise op over every output position (no per-pixel Python loops).

NaN in a max pool window: the result is NaN (and Indices points at the window's first
NaN), as np.maximum / np.max and onnx's reference implementation compute it, on every
path (this numpy one, kernels/conv/pool2d.py's numba loops and its native pool job).
onnxruntime's CPU kernels skip NaN instead; a NaN never silently becomes a number here.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from onnxexec.kernels.conv import pool2d
from onnxexec.ops import _window as win
from onnxexec.ops.registry import op

Ints = tuple[int, ...] | None


def _acc_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def _taps(xw: np.ndarray, nd: int) -> Iterator[tuple[int, np.ndarray]]:
    """(flat tap index, (N, C, O...) slab) for each kernel tap of a window view."""
    for t, idx in enumerate(itertools.product(*(range(k) for k in xw.shape[xw.ndim - nd :]))):
        yield t, xw[(..., *idx)]


def _divisor(x_sp: Sequence[int], g: win.Geometry, include_pad: bool) -> np.ndarray:
    """Per output position: number of taps averaged (product of per-axis counts)."""
    counts = [win.valid_counts(n, g, i, include_pad) for i, n in enumerate(x_sp)]
    div = counts[0].astype(np.float64)
    for cnt in counts[1:]:
        div = np.multiply.outer(div, cnt)
    return div


def _fast_2d(x: np.ndarray, g: win.Geometry) -> tuple[np.ndarray, win.Geometry] | None:
    """x as (N, C, H, W) and g as a 2-D geometry when the compiled float32 kernels
    apply (1-D pools become 1-row 2-D ones), else None."""
    if x.dtype != np.float32 or x.size == 0 or x.ndim not in (3, 4):
        return None
    if x.ndim == 4:
        return x, g
    g2 = win.Geometry(
        (1, *g.kernel), (1, *g.strides), (1, *g.dilations),
        (0, *g.pads_begin), (0, *g.pads_end), (1, *g.out),
    )  # fmt: skip
    return x[:, :, None, :], g2


def average_pool(x: np.ndarray, g: win.Geometry, count_include_pad: int = 0) -> np.ndarray:
    """Mean of each window; the divisor counts real inputs, plus the explicit padding
    when count_include_pad, never the ceil_mode overhang past the padding."""
    fast = _fast_2d(x, g)
    if fast is None:
        return average_pool_numpy(x, g, count_include_pad)
    x2, g2 = fast
    y = pool2d.avg_pool2d(
        x2, g2.kernel, g2.strides, g2.dilations, g2.pads_begin, g2.pads_end, g2.out,
        bool(count_include_pad),
    )  # fmt: skip
    return y.reshape(x.shape[:2] + g.out)


def average_pool_numpy(x: np.ndarray, g: win.Geometry, count_include_pad: int = 0) -> np.ndarray:
    """average_pool for any float dtype and rank, one vectorized add per kernel tap."""
    nd = len(g.kernel)
    dt = _acc_dtype(x.dtype)
    xw = win.windows(win.padded(x.astype(dt, copy=False), g, 0), g)
    acc = np.zeros(x.shape[:2] + g.out, dtype=dt)
    for _, slab in _taps(xw, nd):
        acc += slab
    acc /= _divisor(x.shape[2:], g, bool(count_include_pad)).astype(dt)
    return acc.astype(x.dtype, copy=False)


def lp_pool(x: np.ndarray, g: win.Geometry, p: float) -> np.ndarray:
    """(sum over the window of |x|^p)^(1/p); padding contributes zeros."""
    nd = len(g.kernel)
    dt = _acc_dtype(x.dtype)
    xw = win.windows(win.padded(np.abs(x.astype(dt)), g, 0), g)
    acc = np.zeros(x.shape[:2] + g.out, dtype=dt)
    for _, slab in _taps(xw, nd):
        acc += slab**p
    return (acc ** (1.0 / p)).astype(x.dtype, copy=False)


def _lowest(dt: np.dtype) -> float | int:
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def max_pool(
    x: np.ndarray, g: win.Geometry, want_indices: bool = False, storage_order: int = 0
) -> tuple[np.ndarray, np.ndarray | None]:
    """Max of each window, and optionally the flat input index of the first maximum.

    Indices count over the whole input tensor (N, C, D...): row-major spatial
    offsets for storage_order 0, column-major (first spatial axis fastest) for 1.
    """
    fast = _fast_2d(x, g)
    if fast is None:
        return max_pool_numpy(x, g, want_indices, storage_order)
    x2, g2 = fast
    y, idx = pool2d.max_pool2d(
        x2, g2.kernel, g2.strides, g2.dilations, g2.pads_begin, g2.out,
        want_indices, storage_order,
    )  # fmt: skip
    shape = x.shape[:2] + g.out
    return y.reshape(shape), None if idx is None else idx.reshape(shape)


def max_pool_numpy(
    x: np.ndarray, g: win.Geometry, want_indices: bool = False, storage_order: int = 0
) -> tuple[np.ndarray, np.ndarray | None]:
    """max_pool for any dtype and rank, one vectorized max per kernel tap."""
    nd = len(g.kernel)
    xw = win.windows(win.padded(x, g, _lowest(x.dtype)), g)
    best = None
    arg = np.zeros(x.shape[:2] + g.out, dtype=np.int64) if want_indices else None
    for t, slab in _taps(xw, nd):
        if best is None:
            best = slab.copy()
            continue
        if arg is not None:
            better = slab > best  # strict: the first maximum in tap order wins
            if slab.dtype.kind == "f":  # and the first NaN beats every number
                better |= np.isnan(slab) & ~np.isnan(best)
            arg[better] = t
            np.copyto(best, slab, where=better)
        else:
            np.maximum(best, slab, out=best)
    assert best is not None
    if arg is None:
        return best, None
    sp = x.shape[2:]
    tap_pos = np.unravel_index(arg, g.kernel)
    flat = np.zeros_like(arg)
    order = range(nd) if storage_order == 0 else reversed(range(nd))
    for ax in order:
        start = (np.arange(g.out[ax]) * g.strides[ax] - g.pads_begin[ax]).reshape(
            (-1,) + (1,) * (nd - 1 - ax)
        )
        flat = flat * sp[ax] + start + tap_pos[ax] * g.dilations[ax]
    plane = int(np.prod(sp))
    nc = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2] + (1,) * nd)
    return best, flat + nc * plane


def _geom(
    x: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Ints,
    pads: Ints,
    auto_pad: str,
    dilations: Ints = None,
    ceil_mode: int = 0,
) -> win.Geometry:
    if len(kernel_shape) != x.ndim - 2:
        raise ValueError(f"kernel_shape {list(kernel_shape)} does not fit input rank {x.ndim}")
    return win.geometry(
        x.shape[2:], kernel_shape, strides, dilations, pads, auto_pad, bool(ceil_mode)
    )


# --- AveragePool: 1 (no count_include_pad), 7, 10 (ceil_mode), 19 (dilations) ---


@op("AveragePool", since=19)
def average_pool_v19(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    dilations: Ints = None,
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    """X (N, C, D...) -> Y (N, C, O...)."""
    g = _geom(x, kernel_shape, strides, pads, auto_pad, dilations, ceil_mode)
    return average_pool(x, g, count_include_pad)


@op("AveragePool", since=10)
def average_pool_v10(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    g = _geom(x, kernel_shape, strides, pads, auto_pad, None, ceil_mode)
    return average_pool(x, g, count_include_pad)


@op("AveragePool", since=7)
def average_pool_v7(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    count_include_pad: int = 0,
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    return average_pool(x, _geom(x, kernel_shape, strides, pads, auto_pad), count_include_pad)


@op("AveragePool", since=1)
def average_pool_v1(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    """Opsets 1-6: padding never counted."""
    return average_pool(x, _geom(x, kernel_shape, strides, pads, auto_pad), 0)


# --- MaxPool: 1 (no Indices), 8 (storage_order, Indices), 10 (dilations, ceil_mode) ---


@op("MaxPool", since=10, wants=("outputs_used",))
def max_pool_v10(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Ints = None,
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    storage_order: int = 0,
    strides: Ints = None,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple[np.ndarray, np.ndarray | None]:
    """X (N, C, D...) -> Y (N, C, O...), Indices int64 (N, C, O...)."""
    g = _geom(x, kernel_shape, strides, pads, auto_pad, dilations, ceil_mode)
    want = len(outputs_used) > 1 and outputs_used[1]
    return max_pool(x, g, want, storage_order)


@op("MaxPool", since=8, wants=("outputs_used",))
def max_pool_v8(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    storage_order: int = 0,
    strides: Ints = None,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple[np.ndarray, np.ndarray | None]:
    g = _geom(x, kernel_shape, strides, pads, auto_pad)
    want = len(outputs_used) > 1 and outputs_used[1]
    return max_pool(x, g, want, storage_order)


@op("MaxPool", since=1)
def max_pool_v1(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    return max_pool(x, _geom(x, kernel_shape, strides, pads, auto_pad))[0]


# --- LpPool: 1 (float p, optional kernel_shape), 2 (int p), 18 (dilations, ceil_mode) ---


@op("LpPool", since=18)
def lp_pool_v18(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    dilations: Ints = None,
    kernel_shape: tuple[int, ...],
    p: int = 2,
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    """X (N, C, D...) -> Y (N, C, O...): the p-norm of each window."""
    return lp_pool(x, _geom(x, kernel_shape, strides, pads, auto_pad, dilations, ceil_mode), p)


@op("LpPool", since=2)
def lp_pool_v2(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    kernel_shape: tuple[int, ...],
    p: int = 2,
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    return lp_pool(x, _geom(x, kernel_shape, strides, pads, auto_pad), p)


@op("LpPool", since=1)
def lp_pool_v1(
    x: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    kernel_shape: Ints = None,
    p: float = 2.0,
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    """Opset 1: float p; without kernel_shape the window is the whole spatial extent."""
    kernel = kernel_shape or x.shape[2:]
    return lp_pool(x, _geom(x, kernel, strides, pads, auto_pad), p)


# --- Global pools ---


@op("GlobalAveragePool", since=1)
def global_average_pool(x: np.ndarray) -> np.ndarray:
    """X (N, C, D...) -> Y (N, C, 1...)."""
    axes = tuple(range(2, x.ndim))
    return x.mean(axis=axes, keepdims=True, dtype=_acc_dtype(x.dtype)).astype(x.dtype)


@op("GlobalMaxPool", since=1)
def global_max_pool(x: np.ndarray) -> np.ndarray:
    """X (N, C, D...) -> Y (N, C, 1...)."""
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalLpPool", since=2)
def global_lp_pool(x: np.ndarray, *, p: int = 2) -> np.ndarray:
    """X (N, C, D...) -> Y (N, C, 1...): the p-norm over all spatial positions."""
    xa = np.abs(x.astype(_acc_dtype(x.dtype)))
    s = (xa**p).sum(axis=tuple(range(2, x.ndim)), keepdims=True)
    return (s ** (1.0 / p)).astype(x.dtype)


@op("GlobalLpPool", since=1)
def global_lp_pool_v1(x: np.ndarray, *, p: float = 2.0) -> np.ndarray:
    return global_lp_pool(x, p=p)  # type: ignore[arg-type]


# --- MaxUnpool ---


@op("MaxUnpool", since=9)
def max_unpool(
    x: np.ndarray,
    indices: np.ndarray,
    output_shape: np.ndarray | None = None,
    *,
    kernel_shape: tuple[int, ...],
    pads: Ints = None,
    strides: Ints = None,
) -> np.ndarray:
    """X (N, C, I...), I int64 (N, C, I...) -> Y (N, C, O...).

    Indices are flat offsets into the default-shaped output (in - 1) * s + k - pads
    (as MaxPool produced them); an explicit output_shape only pads that result at
    the end (onnx reference semantics).
    """
    nd = x.ndim - 2
    s, _, p = win.defaults(nd, strides, None, pads)
    inferred = (
        *x.shape[:2],
        *((x.shape[2 + i] - 1) * s[i] - p[i] - p[nd + i] + kernel_shape[i] for i in range(nd)),
    )
    y = np.zeros(int(np.prod(inferred)), dtype=x.dtype)
    y[indices.reshape(-1)] = x.reshape(-1)
    y = y.reshape(inferred)
    if output_shape is None:
        return y
    shape = tuple(int(v) for v in output_shape.reshape(-1))
    res = np.zeros(shape, dtype=x.dtype)
    res[tuple(slice(0, min(a, b)) for a, b in zip(inferred, shape, strict=True))] = y[
        tuple(slice(0, min(a, b)) for a, b in zip(inferred, shape, strict=True))
    ]
    return res
