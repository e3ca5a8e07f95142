"""Feeds onnxruntime converts (lists, scalars, strings, big-endian) give its results;
a numpy array of the wrong dtype is still refused."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto

import onnxexec
from tests.unit.api import models


def _both(model, feed):
    data = model.SerializeToString()
    theirs = ort.InferenceSession(data).run(None, feed)[0]
    ours = onnxexec.InferenceSession(data).run(None, feed)[0]
    return ours, theirs


@pytest.mark.parametrize(
    ("elem", "shape", "value"),
    [
        (TensorProto.FLOAT, [3, 2], [[1, 2.5], [3, 4], [5, 6]]),  # ints and floats mixed
        (TensorProto.INT64, [2], [7, -3]),
        (TensorProto.INT32, [2], [7, -3]),
        (TensorProto.BOOL, [2], [True, False]),
        (TensorProto.FLOAT, [0], []),
    ],
)
def test_lists_are_converted_like_onnxruntime(elem, shape, value):
    ours, theirs = _both(models.identity(elem, shape), {"x": value})
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    ("elem", "value", "dtype"),
    [
        (TensorProto.DOUBLE, 2.5, np.float64),
        (TensorProto.INT64, 4, np.int64),
        (TensorProto.BOOL, True, np.bool_),
    ],
)
def test_python_scalars_become_0d_tensors(elem, value, dtype):
    # onnxruntime 1.32 refuses Python scalars ("Unable to handle object of type float");
    # the issue asks for them, converted as a one-element list would be
    out = onnxexec.InferenceSession(models.identity(elem, []).SerializeToString()).run(
        None, {"x": value}
    )[0]
    assert out.shape == () and out.dtype == dtype and out == value


@pytest.mark.parametrize(
    "x",
    [
        np.array([["this", "is"], ["a", "test"]]),  # |U
        np.array([[b"this", b"is"], [b"a", b"test"]]),  # |S
        np.array([["this", "is"], ["a", "test"]], dtype=object),
        np.array([[b"must", b"have"], [b"same", b"size"]], dtype=np.void),
        [["Olá", "你好"], ["여보세요", "hello"]],  # a list of str
    ],
    ids=["U", "S", "object", "void", "list"],
)
def test_string_feeds_come_back_as_str_objects(x):
    model = models.identity(TensorProto.STRING, [2, 2]).SerializeToString()
    ours = onnxexec.InferenceSession(model).run(None, {"x": x})[0]
    assert ours.dtype == object and [type(v) for v in ours.ravel()] == [str] * 4
    # independent oracle: numpy's own decoding of the items
    arr = np.asarray(x)
    want = arr.view(f"S{arr.itemsize}") if arr.dtype.kind == "V" else arr
    expected = np.char.decode(want, "utf-8") if want.dtype.kind == "S" else want.astype(str)
    np.testing.assert_array_equal(ours.astype(str), expected)
    if arr.dtype.kind in "UO":  # onnxruntime agrees (it garbles |S of unequal lengths)
        np.testing.assert_array_equal(ours, ort.InferenceSession(model).run(None, {"x": x})[0])


def test_big_endian_array_is_read_by_value():
    x = np.arange(6, dtype=">f4").reshape(3, 2)
    out = onnxexec.InferenceSession(models.mul().SerializeToString()).run(None, {"X": x})[0]
    # onnxruntime 1.32 reads the bytes as little-endian (garbage); numpy float64 is the oracle
    expected = x.astype(np.float64) * models.W.astype(np.float64)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected.astype(np.float32))


@pytest.mark.parametrize(
    ("elem", "value", "match"),
    [
        (TensorProto.FLOAT, np.zeros(2, np.float64), "does not cast feeds"),
        (TensorProto.INT64, [1.5, 2.0], "got a list of float64"),
        (TensorProto.UINT8, [300], "do not fit"),
        (TensorProto.BOOL, [1, 0], "got a list of int64"),
        (TensorProto.FLOAT, ["a", "b"], "got a list of <U1"),
    ],
)
def test_values_the_declared_type_cannot_hold_are_refused(elem, value, match):
    s = onnxexec.InferenceSession(models.identity(elem, [2]).SerializeToString())
    with pytest.raises(onnxexec.InvalidFeedError, match=match):
        s.run(None, {"x": value})
