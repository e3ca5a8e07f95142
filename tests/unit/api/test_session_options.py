"""SessionOptions as onnxruntime has them: config entries, initializers, external data,
free-dimension overrides, model config, the optimized model with external data."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper
from onnx.external_data_helper import set_external_data

import onnxexec
from onnxexec.capi import onnxruntime_pybind11_state as C
from tests.unit.api import models
from tests.unit.helpers import make_model, tensor_info

X = np.arange(6, dtype=np.float32).reshape(3, 2)
# onnxruntime reads initializers given as OrtValues when the session is created and
# crashes if they are gone by then: the tests keep every one alive here.
_ALIVE: list = []


def keep(value):
    _ALIVE.append(value)
    return value


def _both(opts_fn, model, feed=None):
    """(our session, onnxruntime's) built with the same option calls."""
    ours, theirs = onnxexec.SessionOptions(), ort.SessionOptions()
    opts_fn(ours, onnxexec)
    opts_fn(theirs, ort)
    return onnxexec.InferenceSession(model, ours), ort.InferenceSession(model, theirs)


def test_config_entries_and_onnxruntimes_error_for_a_missing_key():
    for mod in (onnxexec, ort):
        so = mod.SessionOptions()
        so.add_session_config_entry("CONFIG_KEY", "CONFIG_VAL")
        assert so.get_session_config_entry("CONFIG_KEY") == "CONFIG_VAL"
        with pytest.raises(
            RuntimeError, match="SessionOptions does not have configuration with key: NOPE"
        ):
            so.get_session_config_entry("NOPE")


def test_accepted_knobs_keep_their_values():
    so = onnxexec.SessionOptions()
    knobs = [
        ("inter_op_num_threads", 3),
        ("log_severity_level", 1),
        ("enable_mem_pattern", False),
        ("enable_cpu_mem_arena", False),
        ("use_deterministic_compute", True),
        ("execution_mode", onnxexec.ExecutionMode.ORT_PARALLEL),
    ]
    for name, value in knobs:
        setattr(so, name, value)
        assert getattr(so, name) == value
    s = onnxexec.InferenceSession(models.mul().SerializeToString(), so)
    np.testing.assert_array_equal(s.run(None, {"X": X})[0], X * models.W)


def test_add_initializer_overrides_the_models():
    w = np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], np.float32)

    def opts(so, mod):
        so.add_initializer("W", keep(mod.OrtValue.ortvalue_from_numpy(w)))

    ours, theirs = _both(opts, models.mul().SerializeToString())
    np.testing.assert_array_equal(ours.run(None, {"X": X})[0], theirs.run(None, {"X": X})[0])
    np.testing.assert_array_equal(ours.run(None, {"X": X})[0], X * w)


def _pad_model(tmp_path) -> str:
    """Pad whose pads initializer lives in a file the model does not ship."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1], np.int64), "pads")
    set_external_data(pads, location="pads.bin")
    pads.ClearField("raw_data")
    pads.data_location = onnx.TensorProto.EXTERNAL
    m = make_model(
        [helper.make_node("Pad", ["x", "pads"], ["y"])],
        # pads is also an input (an overridable initializer), as in onnxruntime's own
        # test model: its shape inference then needs no data from the missing file
        [tensor_info("x", shape=[1, 2]), tensor_info("pads", onnx.TensorProto.INT64, [4])],
        [tensor_info("y", shape=[2, 3])],
        opset=13,
    )
    m.graph.initializer.append(pads)
    path = tmp_path / "pad.onnx"
    onnx.save(m, path)
    return str(path)


def test_external_initializers_from_values_and_from_files_in_memory(tmp_path):
    path = _pad_model(tmp_path)
    x = np.array([[1.0, 2.0]], np.float32)
    pads = np.array([0, 0, 1, 1], np.int64)
    variants = [
        lambda so, mod: so.add_external_initializers(
            ["pads"], [mod.OrtValue.ortvalue_from_numpy(pads)]
        ),
        lambda so, mod: so.add_external_initializers_from_files_in_memory(
            ["pads.bin"], [pads.tobytes()], [32]
        ),
    ]
    for opts in variants:
        ours, _ = _both(opts, path)  # onnxruntime accepts the same calls
        # (onnxruntime 1.32 then fails running Pad on the in-memory file: numpy is the oracle)
        np.testing.assert_array_equal(ours.run(None, {"x": x})[0], np.pad(x, [(0, 1), (0, 1)]))
    with pytest.raises(onnxexec.ModelLoadError):  # without them the data is missing
        onnxexec.InferenceSession(path)


@pytest.mark.parametrize(
    "opts",
    [
        lambda so, mod: (
            so.add_free_dimension_override_by_name("Dim1", 4),
            so.add_free_dimension_override_by_name("Dim2", 6),
        ),
        lambda so, mod: (
            so.add_free_dimension_override_by_denotation("DATA_BATCH", 3),
            so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 5),
        ),
    ],
    ids=["by_name", "by_denotation"],
)
def test_free_dimension_overrides(opts):
    ours, theirs = _both(opts, models.free_dims().SerializeToString())
    assert ours.get_inputs()[0].shape == theirs.get_inputs()[0].shape
    fixed = theirs.get_inputs()[0].shape
    with pytest.raises(onnxexec.InvalidFeedError, match="dimension 0 must be"):
        ours.run(None, {"x": np.zeros((fixed[0] + 1, fixed[1], 5), np.float32)})


def test_session_options_from_the_models_ort_config(monkeypatch):
    m = models.mul()
    cfg = {"session_options": {"intra_op_num_threads": 2, "inter_op_num_threads": 5,
                               "graph_optimization_level": 99, "enable_profiling": 1}}  # fmt: skip
    helper.set_model_props(m, {"ort_config": json.dumps(cfg)})
    data = m.SerializeToString()
    assert (
        onnxexec.InferenceSession(data).get_session_options().inter_op_num_threads == 0
    )  # not asked
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    ours, theirs = onnxexec.InferenceSession(data), ort.InferenceSession(data)
    for name in ("intra_op_num_threads", "inter_op_num_threads", "enable_profiling"):
        assert getattr(ours.get_session_options(), name) == getattr(
            theirs.get_session_options(), name
        )
    assert int(ours.get_session_options().graph_optimization_level) == 99
    os.remove(ours.end_profiling())
    os.remove(theirs.end_profiling())


def test_optimized_model_with_external_initializers_reloads(tmp_path):
    w = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)  # 512 bytes
    b = np.ones(2, np.float32)  # 8 bytes: stays inline
    m = make_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["t"]),
            helper.make_node("Add", ["t", "b2"], ["y"]),
        ],
        [tensor_info("x", shape=[1, 2])],
        [tensor_info("y", shape=[1, 64])],
        {"w": w, "b2": np.ones(64, np.float32)[:2].repeat(32) * b[0]},
    )
    so = onnxexec.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt" / "model.onnx")
    os.makedirs(tmp_path / "opt")
    so.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", "weights.bin"
    )
    so.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "300"
    )
    x = np.array([[1.0, -2.0]], np.float32)
    first = onnxexec.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})[0]
    assert (tmp_path / "opt" / "weights.bin").stat().st_size >= w.nbytes
    again = onnxexec.InferenceSession(so.optimized_model_filepath).run(None, {"x": x})[0]
    np.testing.assert_allclose(again, first, rtol=1e-6)
    np.testing.assert_allclose(first, x.astype(np.float64) @ w + 1.0, rtol=1e-5)


def test_custom_op_libraries_are_refused_with_not_implemented():
    with pytest.raises(C.NotImplemented, match="custom op library"):
        onnxexec.SessionOptions().register_custom_ops_library("./libcustom_op_library.so")
