"""IOBinding against onnxruntime's, on the CPU."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import onnxexec
from onnxexec.capi import onnxruntime_pybind11_state as C
from tests.unit.api import models

X = np.arange(6, dtype=np.float32).reshape(3, 2)


def _expected() -> np.ndarray:
    s = ort.InferenceSession(models.mul().SerializeToString())
    b = s.io_binding()
    b.bind_cpu_input("X", X)
    b.bind_output("Y")
    s.run_with_iobinding(b)
    return b.copy_outputs_to_cpu()[0]


@pytest.fixture
def session() -> onnxexec.InferenceSession:
    return onnxexec.InferenceSession(models.mul().SerializeToString())


def test_bind_cpu_input_and_output_by_name(session):
    b = session.io_binding()
    b.bind_cpu_input("X", X)
    b.bind_output("Y")
    b.synchronize_inputs()
    session.run_with_iobinding(b)
    b.synchronize_outputs()
    out = b.copy_outputs_to_cpu()
    np.testing.assert_array_equal(out[0], _expected())
    vec = b.get_outputs()
    assert len(vec) == 1 and vec[0].shape() == [3, 2]


def test_bind_ortvalues_and_preallocated_output(session):
    b = session.io_binding()
    b.bind_ortvalue_input("X", onnxexec.OrtValue.ortvalue_from_numpy(X))
    out = onnxexec.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32)
    b.bind_ortvalue_output("Y", out)
    session.run_with_iobinding(b)
    np.testing.assert_array_equal(out.numpy(), _expected())  # written in place
    assert b.get_outputs()[0] is out


def test_bind_raw_pointers(session):
    dest = np.zeros((3, 2), np.float32)
    b = session.io_binding()
    b.bind_input("X", "cpu", 0, np.float32, [3, 2], X.ctypes.data)
    b.bind_output("Y", "cpu", 0, np.float32, [3, 2], dest.ctypes.data)
    session.run_with_iobinding(b)
    np.testing.assert_array_equal(dest, _expected())


def test_clear_bindings_and_errors(session):
    b = session.io_binding()
    b.bind_cpu_input("X", X)
    b.bind_output("Y")
    session.run_with_iobinding(b)
    b.clear_binding_outputs()
    assert len(b.get_outputs()) == 0
    with pytest.raises(C.InvalidArgument):
        session.run_with_iobinding(b)  # no output bound
    b.bind_ortvalue_output("Y", onnxexec.OrtValue.ortvalue_from_shape_and_type([2, 2], np.float32))
    with pytest.raises(C.InvalidArgument, match="cannot hold"):
        session.run_with_iobinding(b)
    b.clear_binding_inputs()
    b.bind_output("Y")
    with pytest.raises(ValueError, match="Required inputs"):
        session.run_with_iobinding(b)
    with pytest.raises(RuntimeError):
        b.bind_output("Y", "cuda", 0)
