"""onnxexec's errors are caught by `except` clauses written for onnxruntime."""

from __future__ import annotations

import builtins

import numpy as np
import onnxruntime as ort
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

import onnxexec
from onnxexec import errors
from onnxexec.capi import onnxruntime_pybind11_state as ours_c
from tests.unit.api import models

CLASSES = [
    "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
    "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail",
    "ModelLoadCanceled", "ModelRequiresCompilation", "NotFound",
]  # fmt: skip


@pytest.mark.parametrize("name", CLASSES)
def test_capi_exports_onnxruntimes_exception_classes(name):
    ours = getattr(ours_c, name)
    assert ours.__name__ in (name, "NotImplementedStatus")
    # onnxruntime's are plain Exception subclasses: so are ours
    assert getattr(ort_c, name).__mro__[1:] == (Exception, BaseException, object)
    assert ours.__mro__[1:] == (Exception, BaseException, object)


def _ours_for(ort_exc: BaseException) -> type:
    """The class in our capi module (or builtins) with the name of onnxruntime's class."""
    name = type(ort_exc).__name__
    return getattr(ours_c, name, None) or getattr(builtins, name)


BAD_FEEDS = [
    {"X": np.zeros((3, 2), np.float64)},  # wrong dtype: InvalidArgument
    {"X": np.zeros((4, 2), np.float32)},  # wrong dimension: InvalidArgument
    {},  # missing input: ValueError
]


@pytest.mark.parametrize("feed", BAD_FEEDS)
def test_bad_feed_raises_what_onnxruntime_code_catches(feed):
    model = models.mul().SerializeToString()
    with pytest.raises(Exception) as ort_err:
        ort.InferenceSession(model).run(None, feed)
    with pytest.raises(errors.InvalidFeedError) as our_err:
        onnxexec.InferenceSession(model).run(None, feed)
    assert isinstance(our_err.value, _ours_for(ort_err.value))
    assert isinstance(our_err.value, ours_c.InvalidArgument | ValueError)


def test_missing_file_and_bad_bytes_match_onnxruntime(tmp_path):
    for source in (str(tmp_path / "nope.onnx"), b"not a model"):
        with pytest.raises(Exception) as ort_err:
            ort.InferenceSession(source)
        with pytest.raises(errors.OnnxExecError) as our_err:
            onnxexec.InferenceSession(source)
        assert isinstance(our_err.value, _ours_for(ort_err.value)), (ort_err.value, our_err.value)


def test_unknown_op_is_not_implemented_and_a_failed_node_a_runtime_exception():
    from onnx import helper

    from tests.unit.helpers import make_model, tensor_info

    m = make_model(
        [helper.make_node("NoSuchOp", ["x"], ["y"], domain="custom.x")],
        [tensor_info("x", shape=[1])],
        [tensor_info("y", shape=[1])],
        extra_opsets=[helper.make_opsetid("custom.x", 1)],
    )
    with pytest.raises(ours_c.NotImplemented):
        onnxexec.InferenceSession(m.SerializeToString())
    assert issubclass(errors.NodeExecutionError, ours_c.RuntimeException)
    assert issubclass(errors.InvalidGraphError, ours_c.InvalidGraph)
    assert issubclass(errors.RunTerminatedError, ours_c.Fail)
