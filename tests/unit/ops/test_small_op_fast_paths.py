"""Fast paths of the small ops (Gather, Reshape, Squeeze/Unsqueeze, Concat, Shape, Slice,
Cast, Flatten, Transpose) against the general code and hand-written numpy references,
on the edge cases the spec singles out: negative indices and axes, out-of-range errors,
0-d indices, empty tensors, allowzero, -1 inference, 0 dims."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from onnxexec.ops import cast as cast_ops
from onnxexec.ops import indexing, shape, slicing

I64 = np.int64


def _generic_gather(data: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    """The checked path: indices validated and normalised by _checked, then np.take."""
    axis = axis % data.ndim
    return np.take(data, indexing._checked(idx, data.shape[axis], "Gather"), axis=axis)


# --- Gather ---------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_gather_negative_indices_match_generic(axis: int, dtype: type) -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    n = data.shape[axis]
    idx = np.array([[-1, 0], [-n, n - 1]], dtype=dtype)
    out = indexing.gather(data, idx, axis=axis)
    want = np.take(data, np.where(idx < 0, idx + n, idx), axis=axis % 2)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out, _generic_gather(data, idx, axis))
    assert out.dtype == np.float32 and out.shape == want.shape


@pytest.mark.parametrize("i", [0, 2, -1, -3])
def test_gather_0d_index_on_1d_is_0d_array(i: int) -> None:
    data = np.array([10, 20, 30], dtype=I64)
    out = indexing.gather(data, np.array(i, dtype=I64))
    assert type(out) is np.ndarray and out.shape == () and out.dtype == I64
    assert int(out) == [10, 20, 30][i]


def test_gather_0d_index_strings_and_rows() -> None:
    words = np.array(["a", "bc", "def"], dtype=object)
    out = indexing.gather(words, np.array(-1, dtype=I64))
    assert type(out) is np.ndarray and out.shape == () and out.dtype == object
    assert out[()] == "def"
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    row = indexing.gather(data, np.array(1, dtype=I64))
    np.testing.assert_array_equal(row, [2.0, 3.0])
    col = indexing.gather(data, np.array(-1, dtype=I64), axis=1)
    np.testing.assert_array_equal(col, [1.0, 3.0, 5.0])


def test_gather_output_does_not_alias_data() -> None:
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    for idx in (np.array(1, dtype=I64), np.array([1], dtype=I64)):
        out = indexing.gather(data, idx)
        out[...] = -1
        np.testing.assert_array_equal(data, np.arange(6).reshape(3, 2))


@pytest.mark.parametrize(
    ("idx", "bad"),
    [(np.array([0, 3], dtype=I64), 3), (np.array([-4], dtype=I64), -4), (np.array(3, I64), 3)],
)
def test_gather_out_of_range_raises_named_error(idx: np.ndarray, bad: int) -> None:
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    with pytest.raises(IndexError, match=rf"Gather: index {bad} out of range \[-3, 2\]"):
        indexing.gather(data, idx)


def test_gather_empty_cases() -> None:
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = indexing.gather(data, np.zeros((0,), dtype=I64))
    assert out.shape == (0, 2) and out.dtype == np.float32
    empty = np.zeros((0, 2), dtype=np.float32)
    assert indexing.gather(empty, np.zeros((2, 0), dtype=I64)).shape == (2, 0, 2)
    with pytest.raises(IndexError, match="Gather: index 0 out of range"):
        indexing.gather(empty, np.array([0], dtype=I64))
    with pytest.raises(ValueError, match="Gather: axis 2 out of range"):
        indexing.gather(data, np.array([0], dtype=I64), axis=2)


# --- Reshape ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("in_shape", "target", "allowzero", "want"),
    [
        ((1, 16, 768), [1, 16, 12, 64], 0, (1, 16, 12, 64)),
        ((1, 16, 768), [0, 0, 12, -1], 0, (1, 16, 12, 64)),
        ((2, 3, 4), [-1], 0, (24,)),
        ((2, 3, 4), [4, -1], 0, (4, 6)),
        ((2, 3, 4), [0, -1], 0, (2, 12)),
        ((0, 3), [-1, 3], 0, (0, 3)),
        ((0, 3), [3, -1], 0, (3, 0)),
        ((0, 3), [3, 0], 1, (3, 0)),
        ((0, 3), [0, 3], 1, (0, 3)),
        ((2, 3), [0, 3], 0, (2, 3)),
        ((5,), [], 0, None),
        ((1,), [], 0, ()),
    ],
)
def test_reshape_matches_spec(
    in_shape: tuple[int, ...], target: list[int], allowzero: int, want: tuple[int, ...] | None
) -> None:
    data = np.arange(int(np.prod(in_shape)), dtype=np.float32).reshape(in_shape)
    shp = np.array(target, dtype=I64)
    if want is None:
        with pytest.raises(ValueError, match="Reshape: cannot reshape"):
            shape.reshape(data, shp, allowzero=allowzero)
        return
    out = shape.reshape(data, shp, allowzero=allowzero)
    assert out.shape == want
    assert tuple(shape._target_shape(in_shape, tuple(target), allowzero)) == want
    np.testing.assert_array_equal(out.reshape(-1), data.reshape(-1))


@pytest.mark.parametrize(
    ("in_shape", "target", "allowzero", "message"),
    [
        ((2, 3), [0, -1], 1, "allowzero=1 forbids"),
        ((2, 3), [-1, -1], 0, "more than one -1"),
        ((2, 3), [-2, 3], 0, "invalid dim -2"),
        ((2, 3), [4, -1], 0, "cannot infer -1"),
        ((2, 3), [4, 2], 0, "cannot reshape"),
        ((6,), [0, 0], 0, r"shape\[1\] = 0 copies"),
        ((2, 3), [0, 3], 1, "cannot reshape"),
    ],
)
def test_reshape_errors(
    in_shape: tuple[int, ...], target: list[int], allowzero: int, message: str
) -> None:
    data = np.zeros(in_shape, dtype=np.float32)
    with pytest.raises(ValueError, match=message):
        shape.reshape(data, np.array(target, dtype=I64), allowzero=allowzero)


def test_reshape_v5_zero_copies_and_v1_attribute() -> None:
    data = np.zeros((2, 3, 4), dtype=np.float32)
    assert shape.reshape_v5(data, np.array([0, -1], dtype=I64)).shape == (2, 12)
    assert shape.reshape_v1(data, shape=(0, 4, -1)).shape == (2, 4, 3)


# --- Squeeze / Unsqueeze -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("in_shape", "axes", "want"),
    [
        ((), [0], (1,)),
        ((2, 3), [-1], (2, 3, 1)),
        ((2, 3), [0, 3], (1, 2, 3, 1)),
        ((2, 3), [3, 0], (1, 2, 3, 1)),
        ((2, 3), [1, -2], (2, 1, 1, 3)),
        ((0, 3), [1], (0, 1, 3)),
    ],
)
def test_unsqueeze(in_shape: tuple[int, ...], axes: list[int], want: tuple[int, ...]) -> None:
    data = np.zeros(in_shape, dtype=np.float32)
    assert shape.unsqueeze(data, np.array(axes, dtype=I64)).shape == want
    assert shape.unsqueeze_v1(data, axes=tuple(axes)).shape == want


def test_unsqueeze_errors() -> None:
    data = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="Unsqueeze: repeated axes"):
        shape.unsqueeze(data, np.array([1, -3], dtype=I64))
    with pytest.raises(ValueError, match="Unsqueeze: axis 3 out of range"):
        shape.unsqueeze(data, np.array([3], dtype=I64))


@pytest.mark.parametrize(
    ("in_shape", "axes", "want"),
    [
        ((2, 1), [-1], (2,)),
        ((1, 2, 1), [0, 2], (2,)),
        ((1, 2, 1), [2, -3], (2,)),
        ((1, 2, 1), [0, -1, 0], (2,)),
        ((1,), [0], ()),
        ((0, 1), [1], (0,)),
        ((1, 2, 1), None, (2,)),
    ],
)
def test_squeeze(in_shape: tuple[int, ...], axes: list[int] | None, want: tuple[int, ...]) -> None:
    data = np.zeros(in_shape, dtype=np.float32)
    ax = None if axes is None else np.array(axes, dtype=I64)
    assert shape.squeeze(data, ax).shape == want
    assert shape.squeeze_v1(data, axes=None if axes is None else tuple(axes)).shape == want


def test_squeeze_errors() -> None:
    data = np.zeros((1, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="Squeeze: axis 1 has size 2"):
        shape.squeeze(data, np.array([1], dtype=I64))
    with pytest.raises(ValueError, match="Squeeze: axis 2 out of range"):
        shape.squeeze(data, np.array([2], dtype=I64))


# --- Concat, Shape, Flatten, Transpose -----------------------------------------------------


def test_concat_shape_vectors_and_axes() -> None:
    a, b = np.array([1, 16], dtype=I64), np.array([12], dtype=I64)
    out = shape.concat(a, b, np.zeros(0, dtype=I64), axis=0)
    np.testing.assert_array_equal(out, [1, 16, 12])
    assert out.dtype == I64
    x, y = np.ones((2, 1), np.float32), np.zeros((2, 2), np.float32)
    np.testing.assert_array_equal(shape.concat(x, y, axis=-1), [[1, 0, 0], [1, 0, 0]])
    with pytest.raises(ValueError, match="Concat: axis 2 out of range"):
        shape.concat(x, y, axis=2)
    with pytest.raises(ValueError, match="Concat: no inputs"):
        shape.concat(axis=0)


def _spec_shape(dims: tuple[int, ...], start: int, end: int | None) -> list[int]:
    """Operators.md Shape-15: negative wraps once, then clamps to [0, rank]."""
    r = len(dims)
    s = start + r if start < 0 else start
    e = r if end is None else (end + r if end < 0 else end)
    s, e = min(max(s, 0), r), min(max(e, 0), r)
    return list(dims[s:e]) if s < e else []


@pytest.mark.parametrize("end", [None, -5, -1, 0, 2, 9])
@pytest.mark.parametrize("start", [-9, -2, 0, 1, 3, 9])
def test_shape_start_end(start: int, end: int | None) -> None:
    data = np.zeros((2, 3, 0), dtype=np.float32)
    out = shape.shape(data, start=start, end=end)
    assert out.dtype == I64
    assert out.tolist() == _spec_shape(data.shape, start, end)


def test_flatten_axes_and_empty() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert shape.flatten(x, axis=0).shape == (1, 24)
    assert shape.flatten(x, axis=3).shape == (24, 1)
    assert shape.flatten(x, axis=-1).shape == (6, 4)
    assert shape.flatten(np.zeros((0, 3, 4)), axis=2).shape == (0, 4)
    assert shape.flatten(np.array(5.0), axis=0).shape == (1, 1)
    with pytest.raises(ValueError, match="Flatten: axis 4 out of range"):
        shape.flatten(x, axis=4)


def test_transpose_checks_perm() -> None:
    x = np.zeros((2, 3, 4), dtype=np.float32)
    assert shape.transpose(x, perm=(2, 0, 1)).shape == (4, 2, 3)
    assert shape.transpose(x).shape == (4, 3, 2)
    for bad in ((0, 1, -1), (0, 0, 1), (0, 1)):
        with pytest.raises(ValueError, match="Transpose: perm"):
            shape.transpose(x, perm=bad)


# --- Slice -------------------------------------------------------------------------------

INT_MAX, INT_MIN = 2**63 - 1, -(2**63)


def _ref_slice(
    data: np.ndarray, starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> np.ndarray:
    """The spec's per-axis clamping (slicing._axis_slice), the general path."""
    idx = [slice(None)] * data.ndim
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        a = a % data.ndim
        idx[a] = slicing._axis_slice(s, e, st, data.shape[a])
    return data[tuple(idx)]


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ([1], [INT_MAX], [0], [1]),
        ([-3], [-1], [0], [1]),
        ([-100], [100], [1], [2]),
        ([0, 0], [4, 8], [1, 2], [1, 3]),
        ([2, 1], [INT_MIN, 5], [-1, 0], [1, 1]),
        ([5], [2], [1], [1]),
        ([-1], [INT_MIN], [1], [-1]),
        ([-100], [INT_MIN], [1], [-2]),
        ([3, 0], [0, 4], [2, -3], [-1, 2]),
    ],
)
def test_slice_matches_spec_clamping(
    starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> None:
    data = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    arr = [np.array(v, dtype=I64) for v in (starts, ends, axes, steps)]
    out = slicing.slice_(data, *arr)
    np.testing.assert_array_equal(out, _ref_slice(data, starts, ends, axes, steps))


def test_slice_defaults_empty_and_errors() -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    s, e = np.array([1, -2], I64), np.array([3, 4], I64)
    np.testing.assert_array_equal(slicing.slice_(data, s, e), data[1:3, 2:4])
    np.testing.assert_array_equal(slicing.slice_v1(data, starts=(1,), ends=(3,)), data[1:3])
    empty = np.zeros((0, 4), dtype=np.float32)
    assert slicing.slice_(empty, np.array([0], I64), np.array([2], I64)).shape == (0, 4)
    with pytest.raises(ValueError, match="Slice: steps must be non-zero"):
        slicing.slice_(data, s, e, np.array([0, 1], I64), np.array([1, 0], I64))
    with pytest.raises(ValueError, match="Slice: repeated axes"):
        slicing.slice_(data, s, e, np.array([0, -2], I64))
    with pytest.raises(ValueError, match="Slice: axis 2 out of range"):
        slicing.slice_(data, s, e, np.array([0, 2], I64))


# --- Cast --------------------------------------------------------------------------------


def test_cast_direct_conversions() -> None:
    x = np.array([1, -2, 2**40], dtype=I64)
    f = cast_ops.cast_v19(x, to=1)
    assert f.dtype == np.float32 and f.tolist() == [1.0, -2.0, float(2**40)]
    assert cast_ops.cast_v19(x, to=7) is x  # same type: no copy needed
    wrapped = cast_ops.cast_v19(np.array([300, -129, 127], dtype=I64), to=3)  # int8
    assert wrapped.dtype == np.int8 and wrapped.tolist() == [44, 127, 127]
    u = cast_ops.cast_v19(np.array([200, 255], dtype=np.uint8), to=3)
    assert u.tolist() == [-56, -1]
    h = cast_ops.cast_v19(np.array([0.5, -1.25], dtype=np.float16), to=1)
    assert h.dtype == np.float32 and h.tolist() == [0.5, -1.25]
    b = cast_ops.cast_v19(np.array([True, False]), to=11)  # bool -> double
    assert b.dtype == np.float64 and b.tolist() == [1.0, 0.0]


def test_cast_general_paths_keep_spec_rules() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # overflow is silent per the spec (no warning)
        t = cast_ops.cast_v19(np.array([-2.7, 2.7, 1e10], dtype=np.float64), to=6)  # int32
        assert t.dtype == np.int32 and t.tolist()[:2] == [-2, 2]
        big = cast_ops.cast_v19(np.array([1e300], dtype=np.float64), to=1)
        assert big.dtype == np.float32 and np.isinf(big[0])
    nb = cast_ops.cast_v19(np.array([np.nan, 0.0, -3.0], dtype=np.float32), to=9)  # bool
    assert nb.dtype == np.bool_ and nb.tolist() == [True, False, True]
    s = cast_ops.cast_v19(np.array([1, 100], dtype=I64), to=8)  # string
    assert s.dtype == object and s.tolist() == ["1", "100"]
    back = cast_ops.cast_v19(np.array(["7", "-3"], dtype=object), to=7)
    assert back.dtype == I64 and back.tolist() == [7, -3]
    one = cast_ops.cast_v1(np.array([3], dtype=I64), to="FLOAT")
    assert one.dtype == np.float32 and one.tolist() == [3.0]
