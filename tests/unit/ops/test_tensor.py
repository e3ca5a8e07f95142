"""Tensor creation (ops/tensor.py) and order-based ops (ops/sorting.py) at pinned opsets."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.unit.ops._node import run_node


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


# --- Constant / ConstantOfShape --------------------------------------------------------


def test_constant_value_kinds():
    t = np.arange(6, dtype=np.int32).reshape(2, 3)
    (y,) = run_node("Constant", [], opset=1, value=numpy_helper.from_array(t))
    np.testing.assert_array_equal(y, t)
    (y,) = run_node("Constant", [], opset=13, value_float=2.5)
    assert y.dtype == np.float32 and y.shape == () and float(y) == 2.5
    (y,) = run_node("Constant", [], opset=13, value_ints=[3, 4])
    assert y.dtype == np.int64 and y.tolist() == [3, 4]
    (y,) = run_node("Constant", [], opset=13, value_strings=["a", "bc"])
    assert y.dtype == object and y.tolist() == ["a", "bc"]


def test_constant_sparse_value_v11():
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "v"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "i"),
        [2, 3],
    )
    (y,) = run_node("Constant", [], opset=11, sparse_value=sparse)
    np.testing.assert_array_equal(y, [[0, 5, 0], [0, 7, 0]])


def test_constant_of_shape():
    (y,) = run_node("ConstantOfShape", [i64(2, 3)], opset=9)
    assert y.dtype == np.float32 and y.shape == (2, 3) and not y.any()
    value = helper.make_tensor("v", TensorProto.INT32, [1], [7])
    (y,) = run_node("ConstantOfShape", [i64(0, 3)], opset=20, value=value)
    assert y.dtype == np.int32 and y.shape == (0, 3)
    (y,) = run_node("ConstantOfShape", [np.zeros(0, np.int64)], opset=20, value=value)
    assert y.shape == () and int(y) == 7


# --- Range ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "limit", "delta", "dtype", "expected"),
    [
        (3, 9, 3, np.int32, [3, 6]),  # Operators.md Range example 1
        (10, 4, -2, np.int64, [10, 8, 6]),  # example 2
        (5, 5, 1, np.int16, []),
        (0.5, 1.6, 0.5, np.float32, [0.5, 1.0, 1.5]),
        (1.0, -1.0, -0.75, np.float64, [1.0, 0.25, -0.5]),
    ],
)
def test_range_v11(start, limit, delta, dtype, expected):
    ins = [np.array(v, dtype) for v in (start, limit, delta)]
    (y,) = run_node("Range", ins, opset=11)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, expected)


def test_range_v27_float16_stash_in_float32():
    # Above 2048 float16 steps by 2: a float16 running sum would stick at 2048. In float32,
    # start + i * delta rounded once gives [2048, 2048, 2050, 2052, 2052, 2052].
    ins = [np.array(v, np.float16) for v in (2048, 2054, 1)]
    (y,) = run_node("Range", ins, opset=27)
    expected = (2048 + np.arange(6, dtype=np.float32)).astype(np.float16)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, expected)


# --- EyeLike / Trilu / OneHot / NonZero ---------------------------------------------------


def test_eye_like_k_and_dtype():
    (y,) = run_node("EyeLike", [np.zeros((3, 4), np.float32)], opset=9, k=1, dtype=7)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.eye(3, 4, k=1))


@pytest.mark.parametrize("k", [None, 1, -1, 5])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu(k, upper):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    ins = [x] if k is None else [x, np.array(k, np.int64)]
    (y,) = run_node("Trilu", ins, opset=14, upper=upper)
    kk = 0 if k is None else k
    rows, cols = np.indices((3, 4))
    keep = (cols - rows >= kk) if upper else (cols - rows <= kk)
    np.testing.assert_array_equal(y, np.where(keep, x, 0))


def test_one_hot_negative_and_out_of_range_indices():
    idx = np.array([0, -1, 3, 4], np.int64)  # -1 -> depth-1; 4 is out of range -> all off
    (y,) = run_node("OneHot", [idx, np.array(4, np.int64), np.array([2, 5], np.int32)], opset=11)
    expected = [[5, 2, 2, 2], [2, 2, 2, 5], [2, 2, 2, 5], [2, 2, 2, 2]]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, expected)
    (y,) = run_node(
        "OneHot", [idx, np.array([4.0], np.float32), np.array([0, 1], np.float32)], opset=9, axis=0
    )
    np.testing.assert_array_equal(y, np.array(expected).T == 5)


def test_non_zero():
    x = np.array([[1, 0], [1, 1]], np.int32)
    (y,) = run_node("NonZero", [x], opset=13)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [[0, 1, 1], [0, 0, 1]])
    assert run_node("NonZero", [np.zeros((2, 0), np.float32)], opset=13)[0].shape == (2, 0)


# --- Unique --------------------------------------------------------------------------


def test_unique_unsorted_first_occurrence_order():
    # Operators.md Unique, example 1.
    x = np.array([2, 1, 1, 3, 4, 3], np.float32)
    y, idx, inv, cnt = run_node("Unique", [x], 4, opset=11, sorted=0)
    assert y.tolist() == [2, 1, 3, 4]
    assert idx.tolist() == [0, 1, 3, 4]
    assert inv.tolist() == [0, 1, 1, 2, 3, 2]
    assert cnt.tolist() == [1, 2, 2, 1]


def test_unique_sorted_flattened():
    # Operators.md Unique, example 2.
    y, idx, inv, cnt = run_node("Unique", [np.array([[1, 3], [2, 3]], np.int64)], 4, opset=11)
    assert y.tolist() == [1, 2, 3]
    assert idx.tolist() == [0, 2, 1]
    assert inv.tolist() == [0, 2, 1, 2]
    assert cnt.tolist() == [1, 1, 2]


def test_unique_axis():
    # Operators.md Unique, example 4.
    a = [[1.0, 1.0], [0.0, 1.0], [2.0, 1.0], [0.0, 1.0]]
    x = np.array([a, a], np.float32)
    y, idx, inv, cnt = run_node("Unique", [x], 4, opset=11, axis=1)
    np.testing.assert_array_equal(y, [[[0, 1], [1, 1], [2, 1]]] * 2)
    assert idx.tolist() == [1, 0, 2]
    assert inv.tolist() == [1, 0, 2, 0]
    assert cnt.tolist() == [2, 1, 1]


# --- TopK: k attribute before 10, input from 10, largest/sorted from 11 -----------------

T = np.array([[3, 1, 3, 2, 1, 3], [0, 5, 0, 5, 0, 0]], np.float32)


def test_topk_ties_go_to_lower_index():
    vals, idx = run_node("TopK", [T, i64(3)], 2, opset=11)
    np.testing.assert_array_equal(vals, [[3, 3, 3], [5, 5, 0]])
    np.testing.assert_array_equal(idx, [[0, 2, 5], [1, 3, 0]])
    assert idx.dtype == np.int64


def test_topk_smallest():
    vals, idx = run_node("TopK", [T, i64(2)], 2, opset=11, largest=0)
    np.testing.assert_array_equal(vals, [[1, 1], [0, 0]])
    np.testing.assert_array_equal(idx, [[1, 4], [0, 2]])


def test_topk_unsorted_returns_the_same_set():
    vals, idx = run_node("TopK", [T, i64(4)], 2, opset=11, sorted=0)
    for row in range(2):
        assert sorted(idx[row].tolist()) == sorted(np.argsort(-T[row], kind="stable")[:4].tolist())
        np.testing.assert_array_equal(vals[row], T[row, idx[row]])


def test_topk_axis_and_k_zero():
    vals, idx = run_node("TopK", [T.T, i64(1)], 2, opset=11, axis=0)
    np.testing.assert_array_equal(idx, [[0, 1]])
    vals, idx = run_node("TopK", [T, i64(0)], 2, opset=11)
    assert vals.shape == (2, 0) and idx.shape == (2, 0)


def test_topk_v10_input_and_v1_attribute():
    _, idx = run_node("TopK", [T, i64(2)], 2, opset=10)
    np.testing.assert_array_equal(idx, [[0, 2], [1, 3]])
    _, idx = run_node("TopK", [T], 2, opset=1, k=2)
    np.testing.assert_array_equal(idx, [[0, 2], [1, 3]])


# --- ArgMax / ArgMin -------------------------------------------------------------------


def test_argmax_first_and_last_index():
    (y,) = run_node("ArgMax", [T], opset=13, axis=1)
    assert y.dtype == np.int64 and y.tolist() == [[0], [1]]
    (y,) = run_node("ArgMax", [T], opset=13, axis=1, keepdims=0, select_last_index=1)
    assert y.tolist() == [5, 3]


def test_argmin_v1_and_select_last():
    (y,) = run_node("ArgMin", [T], opset=11, axis=-1, keepdims=0)
    assert y.tolist() == [1, 0]
    (y,) = run_node("ArgMin", [T], opset=12, axis=1, keepdims=0, select_last_index=1)
    assert y.tolist() == [4, 5]


def test_bfloat16_argmax():
    x = T.astype(ml_dtypes.bfloat16)
    assert run_node("ArgMax", [x], opset=13, axis=0, keepdims=0)[0].tolist() == [0, 1, 0, 1, 0, 0]
