"""MaxPool with NaN in a window: NaN propagates (np.max / onnx's reference semantics) on
every path, and Indices points at the window's first NaN (ops/pool.py docstring)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.conv import pool2d
from onnxexec.native import parallel
from onnxexec.ops import _window as win
from onnxexec.ops.pool import global_max_pool, max_pool, max_pool_numpy


def _x(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[rng.choice(x.size, size=max(1, x.size // 50), replace=False)] = np.nan
    return x


def _geometry(x: np.ndarray, k: int, s: int, p: int) -> win.Geometry:
    nd = x.ndim - 2
    return win.geometry(x.shape[2:], (k,) * nd, (s,) * nd, (1,) * nd, (p,) * (2 * nd), "NOTSET")


def _oracle(x: np.ndarray, g: win.Geometry) -> tuple[np.ndarray, np.ndarray]:
    """Per window in float64 Python: NaN if any tap is NaN, else the max; the flat index
    of the first NaN or else of the first maximum (row-major)."""
    n, c, h, w = x.shape
    oh, ow = g.out
    y = np.empty((n, c, oh, ow), np.float32)
    idx = np.empty((n, c, oh, ow), np.int64)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        taps = [
            (r, q)
            for r in range(
                i * g.strides[0] - g.pads_begin[0], i * g.strides[0] - g.pads_begin[0] + g.kernel[0]
            )
            for q in range(
                j * g.strides[1] - g.pads_begin[1], j * g.strides[1] - g.pads_begin[1] + g.kernel[1]
            )
            if 0 <= r < h and 0 <= q < w
        ]
        vals = [float(x[b, ch, r, q]) for r, q in taps]
        nan = [t for t, v in zip(taps, vals, strict=True) if v != v]
        r, q = nan[0] if nan else taps[int(np.argmax(vals))]
        y[b, ch, i, j] = x[b, ch, r, q]
        idx[b, ch, i, j] = ((b * c + ch) * h + r) * w + q
    return y, idx


@pytest.mark.parametrize("want_indices", [False, True])
def test_numpy_path(want_indices: bool) -> None:
    x = _x((1, 2, 7, 9))
    g = _geometry(x, 3, 2, 1)
    y, idx = max_pool_numpy(x, g, want_indices)
    ry, ridx = _oracle(x, g)
    np.testing.assert_array_equal(y, ry)
    assert np.isnan(ry).any() and not np.isnan(ry).all()
    if want_indices:
        np.testing.assert_array_equal(idx, ridx)


@pytest.mark.parametrize("want_indices", [False, True])
def test_numba_path(want_indices: bool) -> None:
    x = _x((1, 3, 8, 8), seed=1)
    g = _geometry(x, 3, 1, 1)
    y, idx = pool2d.max_pool2d(
        x, g.kernel, g.strides, g.dilations, g.pads_begin, g.out, want_indices
    )
    ry, ridx = _oracle(x, g)
    np.testing.assert_array_equal(y, ry)
    if want_indices:
        np.testing.assert_array_equal(idx, ridx)


def test_native_pool_job_path() -> None:
    old = parallel.num_threads()
    parallel.set_num_threads(2)
    try:
        x = _x((1, 8, 64, 64), seed=2)
        g = _geometry(x, 3, 1, 1)
        planes, (oh, ow) = 8, g.out
        xp = np.ascontiguousarray(x).reshape(-1)
        out = np.full(planes * oh * ow, 7.0, np.float32)
        geo = pool2d._geo(g.kernel, g.strides, g.dilations, g.pads_begin, (0, 0))
        ran = pool2d._max_native(xp, out, geo, (planes, 64, 64, oh, ow), oh * ow * 9)
        if not ran:
            pytest.skip("the native thread pool is unavailable on this machine")
        np.testing.assert_array_equal(out.reshape(1, 8, oh, ow), _oracle(x, g)[0])
    finally:
        parallel.set_num_threads(old)


def test_handler_paths_agree_and_global() -> None:
    x = _x((2, 3, 10, 10), seed=3)
    g = _geometry(x, 2, 2, 0)
    fast, _ = max_pool(x, g)
    slow, _ = max_pool_numpy(x, g)
    np.testing.assert_array_equal(fast, slow)
    gm = global_max_pool(x)
    np.testing.assert_array_equal(np.isnan(gm), np.isnan(x).any(axis=(2, 3), keepdims=True))
