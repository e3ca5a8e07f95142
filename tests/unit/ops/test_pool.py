"""AveragePool, MaxPool (Indices), LpPool, Global*Pool, MaxUnpool.

Expected values are written out by hand from the spec / PyTorch pooling rules, or
come from a naive per-window loop written here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.unit.ops._node import run_node

RNG = np.random.default_rng(1)


def x1d(values) -> np.ndarray:
    return np.array(values, np.float32).reshape(1, 1, -1)


# --- ceil_mode, padding, count_include_pad (1-D, values by hand) ---


def test_avgpool_ceil_mode_last_window_averages_only_real_elements():
    # len 5, k 2, s 2, ceil: out = ceil(3/2) + 1 = 3 windows [1,2] [3,4] [5]
    (y,) = run_node(
        "AveragePool", [x1d([1, 2, 3, 4, 5])], opset=19, kernel_shape=[2], strides=[2], ceil_mode=1
    )
    np.testing.assert_allclose(y.reshape(-1), [1.5, 3.5, 5.0])
    (y0,) = run_node(
        "AveragePool", [x1d([1, 2, 3, 4, 5])], opset=19, kernel_shape=[2], strides=[2], ceil_mode=0
    )
    np.testing.assert_allclose(y0.reshape(-1), [1.5, 3.5])


def test_ceil_mode_window_may_not_start_in_right_padding():
    # len 5, pads (1, 1), k 2, s 2: ceil((5+2-2)/2)+1 = 4, but window 4 would start
    # at 5 + 1 - 1 = index 5 = the right pad -> dropped; windows [pad,x0] [x1,x2] [x3,x4]
    x = x1d([1, 2, 3, 4, 5])
    (y,) = run_node(
        "AveragePool", [x], opset=19, kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1
    )
    np.testing.assert_allclose(y.reshape(-1), [1.0, 2.5, 4.5])
    (yi,) = run_node(
        "AveragePool",
        [x],
        opset=19,
        kernel_shape=[2],
        strides=[2],
        pads=[1, 1],
        ceil_mode=1,
        count_include_pad=1,
    )
    np.testing.assert_allclose(yi.reshape(-1), [0.5, 2.5, 4.5])
    (ym,) = run_node(
        "MaxPool", [x], opset=12, kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1
    )
    np.testing.assert_allclose(ym.reshape(-1), [1, 3, 5])


def test_count_include_pad_never_counts_ceil_overhang():
    # len 6, k 3, s 2, ceil: windows [0..2] [2..4] [4..6) -> last covers x4, x5 + overhang;
    # count_include_pad=1 divides by 2 there (no explicit padding to count).
    x = x1d([1, 2, 3, 4, 5, 6])
    for cip in (0, 1):
        (y,) = run_node(
            "AveragePool",
            [x],
            opset=10,
            kernel_shape=[3],
            strides=[2],
            ceil_mode=1,
            count_include_pad=cip,
        )
        np.testing.assert_allclose(y.reshape(-1), [2.0, 4.0, 5.5])


def test_count_include_pad_counts_explicit_padding():
    x = x1d([3, 6, 9])
    (y0,) = run_node("AveragePool", [x], opset=7, kernel_shape=[3], pads=[1, 1])
    np.testing.assert_allclose(y0.reshape(-1), [4.5, 6.0, 7.5])
    (y1,) = run_node(
        "AveragePool", [x], opset=7, kernel_shape=[3], pads=[1, 1], count_include_pad=1
    )
    np.testing.assert_allclose(y1.reshape(-1), [3.0, 6.0, 5.0])


def test_avgpool_dilations():
    # k 2, d 2: windows (i, i+2)
    (y,) = run_node(
        "AveragePool", [x1d([1, 2, 3, 4, 5, 6, 7])], opset=19, kernel_shape=[2], dilations=[2]
    )
    np.testing.assert_allclose(y.reshape(-1), [2, 3, 4, 5, 6])


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_auto_pad_same_upper_vs_lower(op):
    # len 4, k 2, s 1: out 4, total pad 1 -> end (UPPER) or beginning (LOWER)
    x = x1d([1, 2, 4, 8])
    (up,) = run_node(op, [x], opset=11, kernel_shape=[2], auto_pad="SAME_UPPER")
    (lo,) = run_node(op, [x], opset=11, kernel_shape=[2], auto_pad="SAME_LOWER")
    if op == "AveragePool":
        np.testing.assert_allclose(up.reshape(-1), [1.5, 3, 6, 8])
        np.testing.assert_allclose(lo.reshape(-1), [1, 1.5, 3, 6])
    else:
        np.testing.assert_allclose(up.reshape(-1), [2, 4, 8, 8])
        np.testing.assert_allclose(lo.reshape(-1), [1, 2, 4, 8])


def test_auto_pad_same_with_stride_2d():
    # 5x5, k 3, s 2: out 3, total pad (3-1)*2+3-5 = 2 -> one each side
    x = RNG.standard_normal((1, 1, 5, 5)).astype(np.float32)
    (y,) = run_node(
        "MaxPool", [x], opset=10, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"
    )
    xp = np.pad(x[0, 0], 1, constant_values=-np.inf)
    ref = np.array(
        [[xp[2 * i : 2 * i + 3, 2 * j : 2 * j + 3].max() for j in range(3)] for i in range(3)]
    )
    np.testing.assert_allclose(y[0, 0], ref)


# --- MaxPool Indices ---


def naive_maxpool_2d(x, k, s, p, d, storage_order):
    n_b, c, h, w = x.shape
    oh = (h + p[0] + p[2] - ((k[0] - 1) * d[0] + 1)) // s[0] + 1
    ow = (w + p[1] + p[3] - ((k[1] - 1) * d[1] + 1)) // s[1] + 1
    y = np.zeros((n_b, c, oh, ow), x.dtype)
    ind = np.zeros((n_b, c, oh, ow), np.int64)
    for n, ch, i, j in itertools.product(range(n_b), range(c), range(oh), range(ow)):
        best, arg = -np.inf, None
        for a, b in itertools.product(range(k[0]), range(k[1])):
            r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
            if 0 <= r < h and 0 <= q < w and x[n, ch, r, q] > best:
                best, arg = x[n, ch, r, q], (r, q)
        y[n, ch, i, j] = best
        off = arg[0] * w + arg[1] if storage_order == 0 else arg[0] + arg[1] * h
        ind[n, ch, i, j] = (n * c + ch) * h * w + off
    return y, ind


@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices_storage_order(storage_order):
    x = RNG.permutation(2 * 3 * 5 * 6).astype(np.float32).reshape(2, 3, 5, 6)
    attrs = {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}
    y, ind = run_node("MaxPool", [x], n_outputs=2, opset=12, storage_order=storage_order, **attrs)
    ry, rind = naive_maxpool_2d(x, [2, 3], [2, 1], [1, 0, 0, 1], [1, 2], storage_order)
    np.testing.assert_array_equal(y, ry)
    assert ind.dtype == np.int64
    np.testing.assert_array_equal(ind, rind)


def test_maxpool_indices_hand_example():
    # storage_order 0: row-major h*W + w; 1: column-major h + w*H
    x = np.array([[[[1, 9, 2], [8, 3, 7]]]], np.float32)  # H 2, W 3
    _, i0 = run_node("MaxPool", [x], n_outputs=2, opset=8, kernel_shape=[2, 2], storage_order=0)
    _, i1 = run_node("MaxPool", [x], n_outputs=2, opset=8, kernel_shape=[2, 2], storage_order=1)
    np.testing.assert_array_equal(i0.reshape(-1), [1, 1])  # (0,1) both windows
    np.testing.assert_array_equal(i1.reshape(-1), [2, 2])  # 0 + 1*2


def test_maxpool_uint8_and_old_opset():
    x = np.array([[[[0, 200], [17, 3]]]], np.uint8)
    (y,) = run_node("MaxPool", [x], opset=12, kernel_shape=[2, 2], pads=[0, 0, 1, 1])
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y[0, 0], [[200, 200], [17, 3]])
    (y1,) = run_node("MaxPool", [x1d([3, 1, 4, 1, 5])], opset=1, kernel_shape=[2], strides=[2])
    np.testing.assert_array_equal(y1.reshape(-1), [3, 4])


# --- LpPool, global pools, MaxUnpool ---


def test_lppool_and_old_float_p():
    x = x1d([3, -4, 0, 5])
    (y,) = run_node("LpPool", [x], opset=18, kernel_shape=[2], strides=[2], p=2)
    np.testing.assert_allclose(y.reshape(-1), [5.0, 5.0])
    (y1,) = run_node("LpPool", [x], opset=18, kernel_shape=[2], p=1, pads=[1, 0])
    np.testing.assert_allclose(y1.reshape(-1), [3, 7, 4, 5])
    (y0,) = run_node("LpPool", [x], opset=1, kernel_shape=[4], p=3.0)
    np.testing.assert_allclose(y0.reshape(-1), [(27 + 64 + 125) ** (1 / 3)], rtol=1e-6)


def test_global_pools():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    (ga,) = run_node("GlobalAveragePool", [x], opset=22)
    (gm,) = run_node("GlobalMaxPool", [x], opset=1)
    (gl,) = run_node("GlobalLpPool", [x], opset=2, p=3)
    np.testing.assert_allclose(ga, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(gm, x.max(axis=(2, 3), keepdims=True))
    ref = (np.abs(x.astype(np.float64)) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)
    np.testing.assert_allclose(gl, ref, rtol=1e-5)
    assert ga.shape == gm.shape == gl.shape == (2, 3, 1, 1)


def test_maxunpool_round_trip_and_output_shape():
    x = np.array([[[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]]], np.float32)
    y, ind = run_node("MaxPool", [x], n_outputs=2, opset=12, kernel_shape=[2, 2], strides=[2, 2])
    (u,) = run_node("MaxUnpool", [y, ind], opset=11, kernel_shape=[2, 2], strides=[2, 2])
    ref = np.zeros_like(x)
    ref[0, 0, 1, 1], ref[0, 0, 1, 3], ref[0, 0, 3, 1], ref[0, 0, 3, 3] = 6, 8, 14, 16
    np.testing.assert_array_equal(u, ref)
    (u5,) = run_node(
        "MaxUnpool",
        [y, ind, np.array([1, 1, 5, 5], np.int64)],
        opset=9,
        kernel_shape=[2, 2],
        strides=[2, 2],
    )
    assert u5.shape == (1, 1, 5, 5)
    np.testing.assert_array_equal(u5[..., :4, :4], ref)
