"""OrtValue and OrtValueVector against onnxruntime's."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import onnxexec
from onnxexec.capi import onnxruntime_pybind11_state as C
from tests.unit.api import models

ARRAYS = [
    np.arange(6, dtype=np.float32).reshape(3, 2),
    np.arange(4, dtype=np.int64),
    np.array([True, False]),
    np.array(3.5, dtype=np.float64),
    np.zeros((2, 0, 3), np.float16),
    np.arange(6, dtype=np.uint8).reshape(2, 3),
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_describes_values_as_onnxruntime(arr):
    theirs = ort.OrtValue.ortvalue_from_numpy(arr)
    ours = onnxexec.OrtValue.ortvalue_from_numpy(arr)
    assert ours.shape() == theirs.shape()
    assert ours.data_type() == theirs.data_type()
    assert ours.element_type() == theirs.element_type()
    assert ours.is_tensor() and ours.has_value() and ours.device_name() == "cpu"
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours.tensor_size_in_bytes() == theirs.tensor_size_in_bytes()


def test_from_numpy_shares_memory_and_array_protocol():
    arr = np.arange(6, dtype=np.float32).reshape(3, 2)
    v = onnxexec.OrtValue.ortvalue_from_numpy(arr)
    assert v.data_ptr() == arr.ctypes.data
    assert np.asarray(v).ctypes.data == arr.ctypes.data
    assert np.asarray(v, dtype=np.float64).dtype == np.float64
    arr[0, 0] = 42
    assert v.numpy()[0, 0] == 42  # the same memory, as onnxruntime on the CPU
    v.update_inplace(np.ones((3, 2), np.float32))
    assert arr.sum() == 6
    with pytest.raises(C.InvalidArgument):
        v.update_inplace(np.ones(5, np.float32))


def test_from_shape_and_type_and_onnx_type():
    for elem in (np.int32, 6):  # numpy type or ONNX element type id (INT32)
        v = onnxexec.OrtValue.ortvalue_from_shape_and_type([2, 3], elem)
        t = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], elem)
        assert (v.shape(), v.data_type()) == (t.shape(), t.data_type())
    u = onnxexec.OrtValue.ortvalue_from_numpy_with_onnx_type(np.zeros(4, np.uint16), 10)
    assert u.data_type() == "tensor(float16)" and u.element_type() == 10
    with pytest.raises(RuntimeError):  # onnxruntime: RuntimeError for a device it lacks
        onnxexec.OrtValue.ortvalue_from_numpy(np.zeros(2), "cuda", 0)


def test_dlpack_both_ways_without_copy():
    arr = np.arange(8, dtype=np.float32)
    v = onnxexec.OrtValue.from_dlpack(arr)
    assert v.data_ptr() == arr.ctypes.data
    back = np.from_dlpack(v)
    assert back.ctypes.data == arr.ctypes.data
    w = C.OrtValue.from_dlpack(v.to_dlpack(), False)  # a bare capsule
    np.testing.assert_array_equal(w.numpy(), arr)
    assert v.__dlpack_device__() == (1, 0)
    b = onnxexec.OrtValue.from_dlpack(
        onnxexec.OrtValue.ortvalue_from_numpy(np.array([True, False]))
    )
    assert b.numpy().dtype == np.bool_
    u8 = np.arange(3, dtype=np.uint8).__dlpack__()
    assert C.is_dlpack_uint8_tensor(u8)
    assert not C.is_dlpack_uint8_tensor(np.array([True]).__dlpack__())
    # the check reads the capsule without consuming it
    assert C.OrtValue.from_dlpack(u8, False).numpy().tolist() == [0, 1, 2]


def test_run_with_ort_values_matches_onnxruntime():
    model = models.mul().SerializeToString()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    expected = (
        ort.InferenceSession(model)
        .run_with_ort_values(["Y"], {"X": ort.OrtValue.ortvalue_from_numpy(x)})[0]
        .numpy()
    )
    s = onnxexec.InferenceSession(model)
    outs = s.run_with_ort_values(["Y"], {"X": onnxexec.OrtValue.ortvalue_from_numpy(x)})
    assert isinstance(outs[0], onnxexec.OrtValue)
    np.testing.assert_array_equal(outs[0].numpy(), expected)
    vec = s._sess.run_with_ort_values({"X": onnxexec.OrtValue.ortvalue_from_numpy(x)}, ["Y"])
    assert isinstance(vec, onnxexec.OrtValueVector) and len(vec) == 1
    np.testing.assert_array_equal(vec.numpy_at(0), expected)
    # an OrtValue is also a plain run() feed
    np.testing.assert_array_equal(
        s.run(None, {"X": onnxexec.OrtValue.ortvalue_from_numpy(x)})[0], expected
    )


def test_sequence_value():
    v = onnxexec.OrtValue([np.zeros(2, np.int64), np.ones(2, np.int64)])
    assert v.is_tensor_sequence() and not v.is_tensor()
    assert v.data_type() == "seq(tensor(int64))"
    assert [a.tolist() for a in v.numpy()] == [[0, 0], [1, 1]]
