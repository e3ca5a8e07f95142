"""Shape and slicing ops (ops/shape.py, ops/slicing.py) at pinned opsets."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# --- Reshape -------------------------------------------------------------------------


def test_reshape_zero_copies_dim_and_minus_one_infers():
    (y,) = run_node("Reshape", [X, i64(0, -1)], opset=14)
    np.testing.assert_array_equal(y, X.reshape(2, 12))


def test_reshape_allowzero_makes_a_real_zero_dim():
    empty = np.zeros((0, 4), np.float32)
    (y,) = run_node("Reshape", [empty, i64(4, 0)], opset=14, allowzero=1)
    assert y.shape == (4, 0)
    # Without allowzero the 0 copies input dim 1 (= 4): (4, 4) holds 16 != 0 elements.
    with pytest.raises(Exception, match="cannot reshape"):
        run_node("Reshape", [empty, i64(4, 0)], opset=14)


def test_reshape_empty_tensor_with_zero_dims():
    empty = np.zeros((2, 0, 3), np.float32)
    assert run_node("Reshape", [empty, i64(0, -1)], opset=14)[0].shape == (2, 0)
    assert run_node("Reshape", [empty, i64(3, 0, 5)], opset=14, allowzero=1)[0].shape == (3, 0, 5)
    # Operators.md Reshape-14: with allowzero=1 a shape may not hold both 0 and -1.
    with pytest.raises(Exception, match="allowzero"):
        run_node("Reshape", [empty, i64(-1, 0)], opset=14, allowzero=1)


def test_reshape_v5_and_v1_attribute():
    (y,) = run_node("Reshape", [X, i64(-1, 4)], opset=5)
    assert y.shape == (6, 4)
    (y,) = run_node("Reshape", [X], opset=4, shape=[4, 0, -1])
    np.testing.assert_array_equal(y, X.reshape(4, 3, 2))


# --- Transpose, Flatten, Expand, Shape, Size --------------------------------------------


def test_transpose_default_reverses():
    (y,) = run_node("Transpose", [X], opset=13)
    np.testing.assert_array_equal(y, X.transpose(2, 1, 0))
    (y,) = run_node("Transpose", [X], opset=1, perm=[1, 0, 2])
    np.testing.assert_array_equal(y, X.transpose(1, 0, 2))


@pytest.mark.parametrize(
    ("axis", "shape"), [(0, (1, 24)), (1, (2, 12)), (-1, (6, 4)), (3, (24, 1))]
)
def test_flatten(axis, shape):
    (y,) = run_node("Flatten", [X], opset=13, axis=axis)
    np.testing.assert_array_equal(y, X.reshape(shape))


def test_expand_shape_may_be_smaller_than_input():
    (y,) = run_node("Expand", [X[:, :1], i64(3, 1)], opset=13)
    assert y.shape == (2, 3, 4)
    np.testing.assert_array_equal(y, np.broadcast_to(X[:, :1], (2, 3, 4)))


def test_shape_start_end_clamp():
    assert run_node("Shape", [X], opset=15, start=-2)[0].tolist() == [3, 4]
    assert run_node("Shape", [X], opset=15, start=1, end=-5)[0].tolist() == []
    assert run_node("Shape", [X], opset=15, start=-10, end=10)[0].tolist() == [2, 3, 4]
    (s,) = run_node("Shape", [X], opset=1)
    assert s.dtype == np.int64 and s.tolist() == [2, 3, 4]


def test_size_is_int64_scalar():
    (s,) = run_node("Size", [X], opset=13)
    assert s.shape == () and s.dtype == np.int64 and int(s) == 24


# --- Squeeze / Unsqueeze: axes attribute before 13, input from 13 -----------------------


Y1 = np.zeros((1, 3, 1, 2), np.float32)


def test_squeeze_axes_input_v13_and_attr_v11():
    assert run_node("Squeeze", [Y1, i64(0, -2)], opset=13)[0].shape == (3, 2)
    assert run_node("Squeeze", [Y1], opset=13)[0].shape == (3, 2)
    assert run_node("Squeeze", [Y1], opset=11, axes=[-2])[0].shape == (1, 3, 2)
    assert run_node("Squeeze", [Y1], opset=1, axes=[0])[0].shape == (3, 1, 2)


def test_squeeze_non_unit_axis_raises():
    with pytest.raises(Exception, match="size 3"):
        run_node("Squeeze", [Y1, i64(1)], opset=13)


def test_unsqueeze_axes_index_the_output():
    assert run_node("Unsqueeze", [X, i64(1, -1)], opset=13)[0].shape == (2, 1, 3, 4, 1)
    assert run_node("Unsqueeze", [X], opset=11, axes=[-1, 0])[0].shape == (1, 2, 3, 4, 1)
    assert run_node("Unsqueeze", [X], opset=1, axes=[0, 4])[0].shape == (1, 2, 3, 4, 1)


# --- Concat / Split / Tile -------------------------------------------------------------


def test_concat_with_empty_input():
    (y,) = run_node("Concat", [X, X[:, :0], X[:, :1]], opset=13, axis=1)
    np.testing.assert_array_equal(y, np.concatenate([X, X[:, :1]], axis=1))
    (y,) = run_node("Concat", [X[:0], X[:0]], opset=13, axis=0)
    assert y.shape == (0, 3, 4)


def test_concat_v1_default_axis_is_1():
    (y,) = run_node("Concat", [X, X], opset=1)
    assert y.shape == (2, 6, 4)


def test_split_v18_num_outputs_uneven():
    x = np.arange(7, dtype=np.float32)
    outs = run_node("Split", [x], 3, opset=18, num_outputs=3)
    assert [o.tolist() for o in outs] == [[0, 1, 2], [3, 4, 5], [6]]


def test_split_v18_sizes_input_with_zero():
    outs = run_node("Split", [X, i64(2, 0, 2)], 3, opset=18, axis=-1)
    assert [o.shape for o in outs] == [(2, 3, 2), (2, 3, 0), (2, 3, 2)]


def test_split_v13_input_and_equal_default():
    outs = run_node("Split", [X, i64(1, 3)], 2, opset=13, axis=2)
    np.testing.assert_array_equal(outs[1], X[:, :, 1:])
    outs = run_node("Split", [X], 2, opset=13, axis=2)
    np.testing.assert_array_equal(outs[0], X[:, :, :2])


def test_split_v11_and_v2_attribute():
    outs = run_node("Split", [X], 2, opset=11, axis=1, split=[1, 2])
    assert [o.shape for o in outs] == [(2, 1, 4), (2, 2, 4)]
    outs = run_node("Split", [X], 2, opset=2, axis=0)
    np.testing.assert_array_equal(outs[1], X[1:])


def test_tile_v6_and_v1():
    (y,) = run_node("Tile", [X, i64(1, 2, 1)], opset=13)
    np.testing.assert_array_equal(y, np.concatenate([X, X], axis=1))
    (y,) = run_node("Tile", [X, np.array([2], np.float32), np.array([2], np.float32)], opset=1)
    np.testing.assert_array_equal(y, np.concatenate([X, X], axis=2))


# --- Slice -----------------------------------------------------------------------------

V = np.arange(6, dtype=np.float32)


@pytest.mark.parametrize(
    ("start", "end", "step", "expected"),
    [
        (-1, INT64_MIN, -1, [5, 4, 3, 2, 1, 0]),  # reverses the whole axis
        (0, INT64_MAX, 1, [0, 1, 2, 3, 4, 5]),
        (INT64_MAX, INT64_MIN, -2, [5, 3, 1]),  # start clamps to dim-1
        (4, 1, -1, [4, 3, 2]),
        (-2, -100, -3, [4, 1]),
        (2, 2, 1, []),  # empty
        (1, 3, -1, []),  # empty, negative step
        (-100, 100, 4, [0, 4]),
        (10, -10, -1, [5, 4, 3, 2, 1, 0]),  # end -10 + 6 = -4 -> clamps to -1 (before 0)
    ],
)
def test_slice_clamping_and_negative_steps(start, end, step, expected):
    (y,) = run_node("Slice", [V, i64(start), i64(end), i64(0), i64(step)], opset=13)
    assert y.tolist() == expected


def test_slice_multi_axis_default_axes_and_steps():
    (y,) = run_node("Slice", [X, i64(1, 0), i64(2, -1)], opset=13)
    np.testing.assert_array_equal(y, X[1:2, 0:-1])
    (y,) = run_node("Slice", [X, i64(-1), i64(INT64_MIN), i64(-1), i64(-2)], opset=13)
    np.testing.assert_array_equal(y, X[:, :, ::-2])


def test_slice_v1_attributes():
    (y,) = run_node("Slice", [X], opset=9, starts=[0, 1], ends=[1, 1000], axes=[0, 2])
    np.testing.assert_array_equal(y, X[0:1, :, 1:])


def test_slice_zero_step_raises():
    with pytest.raises(Exception, match="non-zero"):
        run_node("Slice", [V, i64(0), i64(3), i64(0), i64(0)], opset=13)


# --- Pad: pads attribute before 11, input from 11, axes input from 18 -----------------


M = np.array([[1, 2, 3], [4, 5, 6]], np.float32)


def test_pad_constant_v18_axes_input():
    (y,) = run_node("Pad", [M, i64(1, 2), np.array(9, np.float32), i64(-1)], opset=18)
    np.testing.assert_array_equal(y, [[9, 1, 2, 3, 9, 9], [9, 4, 5, 6, 9, 9]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("reflect", [[3, 2, 1, 2, 3, 2], [6, 5, 4, 5, 6, 5]]),
        ("edge", [[1, 1, 1, 2, 3, 3], [4, 4, 4, 5, 6, 6]]),
        ("wrap", [[2, 3, 1, 2, 3, 1], [5, 6, 4, 5, 6, 4]]),
    ],
)
def test_pad_modes(mode, expected):
    (y,) = run_node("Pad", [M, i64(0, 2, 0, 1)], opset=19, mode=mode)
    np.testing.assert_array_equal(y, expected)


def test_pad_negative_crops():
    (y,) = run_node("Pad", [M, i64(0, -1, 1, 0)], opset=13)
    np.testing.assert_array_equal(y, [[2, 3], [5, 6], [0, 0]])


def test_pad_v2_and_v1_attributes():
    (y,) = run_node("Pad", [M], opset=2, pads=[1, 0, 0, 0], value=-1.0)
    np.testing.assert_array_equal(y, [[-1, -1, -1], [1, 2, 3], [4, 5, 6]])
    (y,) = run_node("Pad", [M], opset=1, paddings=[0, 0, 0, 1], mode="edge")
    np.testing.assert_array_equal(y, [[1, 2, 3, 3], [4, 5, 6, 6]])


# --- Compress / ReverseSequence ----------------------------------------------------------


def test_compress_axis_and_flat():
    (y,) = run_node("Compress", [M, np.array([False, True, True])], opset=11, axis=1)
    np.testing.assert_array_equal(y, [[2, 3], [5, 6]])
    (y,) = run_node("Compress", [M, np.array([True, False, True])], opset=11)
    np.testing.assert_array_equal(y, [1, 3])


def test_reverse_sequence_spec_example():
    # Operators.md ReverseSequence, example 1 (time_axis=0, batch_axis=1).
    x = np.array([[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]], np.float32)
    (y,) = run_node("ReverseSequence", [x, i64(4, 3, 2, 1)], opset=10)
    expected = [[3, 6, 9, 12], [2, 5, 8, 13], [1, 4, 10, 14], [0, 7, 11, 15]]
    np.testing.assert_array_equal(y, expected)
