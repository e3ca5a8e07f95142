"""Module-level functions as onnxruntime has them."""

from __future__ import annotations

import logging

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxexec
from onnxexec.runtime import logs
from tests.unit.api import models
from tests.unit.helpers import make_model, tensor_info


def test_provider_and_device_queries_match_a_cpu_onnxruntime():
    assert onnxexec.get_all_providers() == ort.get_all_providers()
    assert onnxexec.get_available_providers() == ["CPUExecutionProvider"]
    assert onnxexec.get_device() == ort.get_device() == "CPU"


def test_version_and_build_info():
    assert onnxexec.get_version_string() == ort.get_version_string()  # the API level mirrored
    assert "Build Info" in onnxexec.get_build_info() and "onnxexec" in onnxexec.get_build_info()
    onnxexec.disable_telemetry_events()
    onnxexec.enable_telemetry_events()


def _random_model():
    node = helper.make_node("RandomNormal", [], ["y"], shape=[8], dtype=TensorProto.FLOAT)
    return make_model([node], [], [tensor_info("y", shape=[8])]).SerializeToString()


def test_set_seed_makes_unseeded_random_ops_repeatable():
    s = onnxexec.InferenceSession(_random_model())
    onnxexec.set_seed(7)
    a = s.run(None, {})[0]
    onnxexec.set_seed(7)
    b = s.run(None, {})[0]
    onnxexec.set_seed(8)
    c = s.run(None, {})[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.fixture
def restore_logging():
    level = logging.getLogger("onnxexec").level
    yield
    onnxexec.set_default_logger_callback(None)
    logging.getLogger("onnxexec").setLevel(level)


def test_logger_callback_gets_session_records(restore_logging):
    records = []
    onnxexec.set_default_logger_callback(lambda *r: records.append(r), severity=0)
    onnxexec.InferenceSession(models.mul().SerializeToString())
    assert records
    for sev, category, logid, location, message in records:
        assert isinstance(sev, int) and 0 <= sev <= 4
        assert all(isinstance(v, str) for v in (category, logid, location, message))
    onnxexec.set_default_logger_callback(lambda *r: 1 / 0, severity=0)  # raising: swallowed
    onnxexec.InferenceSession(models.mul().SerializeToString())
    onnxexec.set_default_logger_callback(None)
    n = len(records)
    onnxexec.InferenceSession(models.mul().SerializeToString())
    assert len(records) == n


@pytest.mark.parametrize(
    "call", [lambda f: f(print, severity=5), lambda f: f(print, severity=-1), lambda f: f("x")]
)
def test_logger_callback_refuses_what_onnxruntime_refuses(call, restore_logging):
    with pytest.raises(RuntimeError):
        call(ort.set_default_logger_callback)
    with pytest.raises(RuntimeError):
        call(onnxexec.set_default_logger_callback)


def test_logger_severity(restore_logging):
    onnxexec.set_default_logger_severity(3)
    assert logs.log.level == logging.ERROR
    onnxexec.set_default_logger_verbosity(1)
    with pytest.raises(RuntimeError):
        onnxexec.set_default_logger_severity(9)
