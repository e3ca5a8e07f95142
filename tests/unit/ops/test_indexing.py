"""Gather / Scatter family (ops/indexing.py) at pinned opsets."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


# --- Gather / GatherElements / GatherND ---------------------------------------------------


def test_gather_negative_indices():
    (y,) = run_node("Gather", [X, np.array([[0, -1], [-3, 1]], np.int64)], opset=13)
    np.testing.assert_array_equal(y, np.stack([X[[0, 2]], X[[0, 1]]]))
    (y,) = run_node("Gather", [X, np.array(-1, np.int32)], opset=11, axis=1)
    np.testing.assert_array_equal(y, X[:, 3])


def test_gather_v1():
    (y,) = run_node("Gather", [X, i64(2, 0)], opset=1, axis=0)
    np.testing.assert_array_equal(y, X[[2, 0]])


@pytest.mark.parametrize("bad", [3, -4])
def test_gather_out_of_range_raises(bad):
    with pytest.raises(Exception, match=rf"index {bad} out of range \[-3, 2\]"):
        run_node("Gather", [X, i64(0, bad)], opset=13)


def test_gather_empty_indices():
    (y,) = run_node("Gather", [X, np.zeros((0, 2), np.int64)], opset=13, axis=1)
    assert y.shape == (3, 0, 2)


def test_gather_elements_negative_indices():
    # Operators.md GatherElements, example 1, with -2 standing for 0 on an axis of 2.
    data = np.array([[1, 2], [3, 4]], np.float32)
    idx = np.array([[-2, 0], [1, -2]], np.int64)
    (y,) = run_node("GatherElements", [data, idx], opset=13, axis=1)
    np.testing.assert_array_equal(y, [[1, 1], [4, 3]])
    (y,) = run_node("GatherElements", [data, idx], opset=11, axis=0)
    np.testing.assert_array_equal(y, [[1, 2], [3, 2]])  # out[i][j] = data[idx[i][j]][j]


def test_gather_elements_out_of_range_raises():
    with pytest.raises(Exception, match="GatherElements: index 2 out of range"):
        run_node("GatherElements", [X[:2, :2], np.array([[0, 2], [1, 0]], np.int64)], opset=13)


def test_gather_nd_batch_dims():
    # Operators.md GatherND, example 5 (batch_dims = 1).
    data = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    (y,) = run_node("GatherND", [data, np.array([[1], [0]], np.int64)], opset=13, batch_dims=1)
    np.testing.assert_array_equal(y, [[2, 3], [4, 5]])


def test_gather_nd_v11_negative_and_full_index():
    data = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    (y,) = run_node("GatherND", [data, np.array([[-1, 0, 1], [0, 1, -1]], np.int64)], opset=11)
    np.testing.assert_array_equal(y, [data[1, 0, 1], data[0, 1, 1]])
    with pytest.raises(Exception, match="GatherND: index 2 out of range"):
        run_node("GatherND", [data, np.array([[2]], np.int64)], opset=12)


# --- ScatterElements / Scatter ---------------------------------------------------------

D = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
DUP_IDX = np.array([[1, 3, 1, -4]], np.int64)  # -4 is also 1 on an axis of 5
DUP_UPD = np.array([[10.0, 20.0, 30.0, 0.5]], np.float32)


@pytest.mark.parametrize(
    ("reduction", "at1"),
    [
        ("add", 2.0 + 10 + 30 + 0.5),
        ("mul", 2.0 * 10 * 30 * 0.5),
        ("min", 0.5),
        ("max", 30.0),
    ],
)
def test_scatter_elements_reduction_with_duplicates(reduction, at1):
    (y,) = run_node("ScatterElements", [D, DUP_IDX, DUP_UPD], opset=18, axis=1, reduction=reduction)
    other = {"add": 4.0 + 20, "mul": 4.0 * 20, "min": 4.0, "max": 20.0}[reduction]
    np.testing.assert_allclose(y, [[1.0, at1, 3.0, other, 5.0]])


def test_scatter_elements_v16_add_and_v11_none():
    (y,) = run_node("ScatterElements", [D, DUP_IDX, DUP_UPD], opset=16, axis=1, reduction="add")
    assert y[0, 1] == pytest.approx(42.5)
    idx = np.array([[0, 2]], np.int64)
    upd = np.array([[7.0, 8.0]], np.float32)
    (y,) = run_node("ScatterElements", [D, idx, upd], opset=11, axis=-1)
    np.testing.assert_array_equal(y, [[7, 2, 8, 4, 5]])


def test_scatter_elements_does_not_mutate_input():
    data = D.copy()
    run_node("ScatterElements", [data, DUP_IDX, DUP_UPD], opset=18, axis=1, reduction="add")
    np.testing.assert_array_equal(data, D)


def test_scatter_v9_spec_example():
    # Operators.md Scatter, example 1.
    data = np.zeros((3, 3), np.float32)
    idx = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
    upd = np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]], np.float32)
    (y,) = run_node("Scatter", [data, idx, upd], opset=9)
    np.testing.assert_allclose(y, [[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]])


def test_scatter_elements_out_of_range_raises():
    with pytest.raises(Exception, match="index 5 out of range"):
        run_node("ScatterElements", [D, i64(5).reshape(1, 1), D[:, :1]], opset=18, axis=1)


# --- ScatterND -----------------------------------------------------------------------

ND = np.arange(8, dtype=np.float32).reshape(4, 2)


@pytest.mark.parametrize(
    ("reduction", "row0", "row3"),
    [
        ("add", [0 + 1 + 10, 1 + 2 + 20], [6 + 5, 7 + 6]),
        ("mul", [0 * 1 * 10, 1 * 2 * 20], [6 * 5, 7 * 6]),
        ("min", [0, 1], [5, 6]),
        ("max", [10, 20], [6, 7]),
    ],
)
def test_scatter_nd_reduction_with_duplicates(reduction, row0, row3):
    idx = np.array([[0], [-4], [3]], np.int64)  # row 0 twice (0 and -4)
    upd = np.array([[1, 2], [10, 20], [5, 6]], np.float32)
    (y,) = run_node("ScatterND", [ND, idx, upd], opset=18, reduction=reduction)
    np.testing.assert_array_equal(y[0], row0)
    np.testing.assert_array_equal(y[3], row3)
    np.testing.assert_array_equal(y[1:3], ND[1:3])


def test_scatter_nd_v11_element_indices():
    idx = np.array([[1, 0], [2, 1]], np.int64)
    (y,) = run_node("ScatterND", [ND, idx, np.array([-1, -2], np.float32)], opset=11)
    expected = ND.copy()
    expected[1, 0], expected[2, 1] = -1, -2
    np.testing.assert_array_equal(y, expected)


def test_scatter_nd_v16_mul():
    idx = np.array([[2], [2]], np.int64)
    upd = np.array([[2, 2], [3, 3]], np.float32)
    (y,) = run_node("ScatterND", [ND, idx, upd], opset=16, reduction="mul")
    np.testing.assert_array_equal(y[2], ND[2] * 6)


def test_scatter_nd_out_of_range_raises():
    with pytest.raises(Exception, match="ScatterND: index 4 out of range"):
        run_node("ScatterND", [ND, np.array([[4]], np.int64), ND[:1]], opset=18)


# --- TensorScatter -------------------------------------------------------------------


def test_tensor_scatter_linear_and_circular():
    cache = np.zeros((2, 1, 4, 2), np.float32)  # (B, H, max_seq, D)
    update = np.arange(1, 9, dtype=np.float32).reshape(2, 1, 2, 2)
    (y,) = run_node("TensorScatter", [cache, update, i64(1, 2)], opset=24)
    expected = np.zeros_like(cache)
    expected[0, 0, 1:3] = update[0, 0]
    expected[1, 0, 2:4] = update[1, 0]
    np.testing.assert_array_equal(y, expected)
    (y,) = run_node("TensorScatter", [cache, update, i64(3, 0)], opset=24, mode="circular")
    expected = np.zeros_like(cache)
    expected[0, 0, [3, 0]] = update[0, 0]
    expected[1, 0, 0:2] = update[1, 0]
    np.testing.assert_array_equal(y, expected)


def test_tensor_scatter_default_write_index_and_overflow():
    cache = np.zeros((1, 3, 2), np.float32)
    update = np.ones((1, 2, 2), np.float32)
    (y,) = run_node("TensorScatter", [cache, update], opset=24, axis=1)
    np.testing.assert_array_equal(y[0, :, 0], [1, 1, 0])
    with pytest.raises(Exception, match="outside cache length 3"):
        run_node("TensorScatter", [cache, update, i64(2)], opset=24, axis=1)
