"""kernels/conv/pool2d.py (the float32 MaxPool / AveragePool fast path) against a float64
per-pixel numpy reference written from the ONNX spec and the generic numpy path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnxexec.native import parallel
from onnxexec.native.launch import recording
from onnxexec.ops import _window as win
from onnxexec.ops import pool as P


def reference(x, g, mode, include_pad=False, storage_order=0):
    """Per output pixel over the window's taps (float64): max / first argmax, or mean
    over real taps (plus explicit padding when include_pad)."""
    n, c, h, w = x.shape
    oh, ow = g.out
    y = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), dtype=np.int64)
    for nn, cc, i, j in itertools.product(range(n), range(c), range(oh), range(ow)):
        vals, flat, count = [], [], 0
        for a, b in itertools.product(range(g.kernel[0]), range(g.kernel[1])):
            r = i * g.strides[0] - g.pads_begin[0] + a * g.dilations[0]
            q = j * g.strides[1] - g.pads_begin[1] + b * g.dilations[1]
            if 0 <= r < h and 0 <= q < w:
                vals.append(float(x[nn, cc, r, q]))
                off = r * w + q if storage_order == 0 else q * h + r
                flat.append((nn * c + cc) * h * w + off)
                count += 1
            elif (
                include_pad
                and -g.pads_begin[0] <= r < h + g.pads_end[0]
                and -g.pads_begin[1] <= q < w + g.pads_end[1]
            ):
                count += 1
        if mode == "max":
            k = int(np.argmax(vals))
            y[nn, cc, i, j], idx[nn, cc, i, j] = vals[k], flat[k]
        else:
            y[nn, cc, i, j] = sum(vals) / count
    return y, idx


CASES = [
    # kernel, strides, dilations, pads, ceil_mode
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0),  # ResNet stem
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 0),
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 0),
    ((3, 2), (2, 3), (1, 1), (0, 1, 2, 0), 1),  # asymmetric pads + ceil_mode overhang
    ((3, 3), (2, 2), (1, 1), (0, 0, 0, 0), 1),
    ((2, 3), (1, 2), (2, 2), (1, 2, 1, 0), 0),  # dilations
    ((3, 3), (3, 2), (2, 1), (2, 1, 0, 2), 1),
    ((5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 0),
    ((1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 0),
]


def geom(shape, kernel, strides, dilations, pads, ceil_mode):
    return win.geometry(shape[2:], kernel, strides, dilations, pads, "NOTSET", bool(ceil_mode))


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = parallel.num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(before)


def rand(shape, seed=0):
    # distinct values: argmax ties would make Indices depend on the tie rule only
    rng = np.random.default_rng(seed)
    return rng.permutation(np.prod(shape)).reshape(shape).astype(np.float32) / 7 - 40


@pytest.mark.parametrize("case", CASES)
def test_max_pool_matches_reference_and_generic(case, threads):
    x = rand((2, 5, 11, 13))
    g = geom(x.shape, *case)
    y, none = P.max_pool(x, g)
    ref, ref_idx = reference(x, g, "max")
    assert none is None and y.dtype == np.float32 and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref.astype(np.float32))
    np.testing.assert_array_equal(y, P.max_pool_numpy(x, g)[0])
    for order in (0, 1):
        y2, idx = P.max_pool(x, g, True, order)
        _, ref_idx = reference(x, g, "max", storage_order=order)
        assert idx.dtype == np.int64
        np.testing.assert_array_equal(y2, y)
        np.testing.assert_array_equal(idx, ref_idx)
        np.testing.assert_array_equal(idx, P.max_pool_numpy(x, g, True, order)[1])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_matches_reference_and_generic(case, include_pad, threads):
    x = rand((2, 5, 11, 13), seed=1)
    g = geom(x.shape, *case)
    y = P.average_pool(x, g, include_pad)
    ref, _ = reference(x, g, "avg", include_pad=bool(include_pad))
    assert y.dtype == np.float32 and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-5)
    # same summation order as the generic path: bit-identical
    np.testing.assert_array_equal(y, P.average_pool_numpy(x, g, include_pad))


def test_large_planes_split_across_threads(threads):
    x = rand((1, 64, 40, 40), seed=2)
    g = geom(x.shape, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0)
    with recording() as jobs:  # the max pool runs as one native job of the pool
        got = P.max_pool(x, g)[0]
    assert len(jobs) == (parallel.num_threads() > 1)
    np.testing.assert_array_equal(got, P.max_pool_numpy(x, g)[0])
    np.testing.assert_array_equal(P.average_pool(x, g, 1), P.average_pool_numpy(x, g, 1))


def test_nan_propagates_like_generic_path():
    x = rand((1, 2, 8, 8), seed=3)
    x[0, 0, 3, 4] = np.nan
    x[0, 1, 0, 0] = np.nan
    g = geom(x.shape, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0)
    y = P.max_pool(x, g)[0]
    np.testing.assert_array_equal(np.isnan(y), np.isnan(P.max_pool_numpy(x, g)[0]))
    assert np.isnan(y[0, 0, 2, 2]) and np.isnan(y[0, 1, 0, 0])
    np.testing.assert_array_equal(y, P.max_pool_numpy(x, g)[0])


def test_empty_windows_and_1d():
    # pads wider than the kernel: the corner window holds padding only
    x = rand((1, 1, 3, 3), seed=4)
    g = geom(x.shape, (2, 2), (3, 3), (1, 1), (3, 3, 0, 0), 0)
    y = P.max_pool(x, g)[0]
    np.testing.assert_array_equal(y, P.max_pool_numpy(x, g)[0])
    assert y[0, 0, 0, 0] == -np.inf
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(P.average_pool(x, g), P.average_pool_numpy(x, g))
    x1 = rand((2, 3, 17), seed=5)
    g1 = win.geometry((17,), (3,), (2,), (2,), (1, 2), "NOTSET", True)
    np.testing.assert_array_equal(P.max_pool(x1, g1)[0], P.max_pool_numpy(x1, g1)[0])
    np.testing.assert_array_equal(P.max_pool(x1, g1, True)[1], P.max_pool_numpy(x1, g1, True)[1])
    np.testing.assert_array_equal(P.average_pool(x1, g1), P.average_pool_numpy(x1, g1))


def test_other_dtypes_take_the_generic_path():
    x = rand((1, 2, 6, 6)).astype(np.float64)
    g = geom(x.shape, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0)
    y = P.max_pool(x, g)[0]
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, reference(x, g, "max")[0])
