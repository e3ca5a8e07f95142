"""InferenceSession's onnxruntime API beyond run(): providers, fallback, run_async,
profiling, model metadata, sources, memory infos, EP assignment."""

from __future__ import annotations

import json
import pathlib
import threading
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnxexec
from onnxexec.capi import onnxruntime_pybind11_state as C
from tests.unit.api import models

X = np.arange(6, dtype=np.float32).reshape(3, 2)


def test_cuda_first_provider_list_runs_on_cpu_with_onnxruntimes_warning():
    data = models.mul().SerializeToString()
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.warns(UserWarning, match="CUDAExecutionProvider") as theirs:
        ort_s = ort.InferenceSession(data, providers=providers)
    with pytest.warns(UserWarning, match="CUDAExecutionProvider") as ours:
        s = onnxexec.InferenceSession(data, providers=providers)
    assert s.get_providers() == ort_s.get_providers() == ["CPUExecutionProvider"]
    assert s.get_provider_options() == ort_s.get_provider_options()
    assert (
        str(ours[0].message).split(".Available")[0] == str(theirs[0].message).split(".Available")[0]
    )
    assert ours[0].filename == __file__  # the warning points at the caller
    # (name, options) pairs and a parallel provider_options list are accepted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnxexec.InferenceSession(
            data, providers=[("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"]
        )
        onnxexec.InferenceSession(
            data, providers=["CPUExecutionProvider"], provider_options=[{"x": 1}]
        )


def test_unknown_provider_falls_back_at_creation_and_raises_in_set_providers():
    data = models.mul().SerializeToString()
    with pytest.warns(UserWarning) as caught:
        s = onnxexec.InferenceSession(data, providers=["BogusExecutionProvider"])
    assert any("Falling back to ['CPUExecutionProvider']" in str(w.message) for w in caught)
    assert s.get_providers() == ["CPUExecutionProvider"]
    with (
        pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        s.set_providers(["InvalidProvider"])
    s.set_providers(["CPUExecutionProvider"])
    s.disable_fallback()
    s.enable_fallback()
    with pytest.raises(ValueError):  # malformed arguments, as onnxruntime's checker
        onnxexec.InferenceSession(data, providers=[3])


def test_check_and_normalize_provider_args_as_onnxruntime():
    from onnxruntime.capi.onnxruntime_inference_collection import (
        check_and_normalize_provider_args as theirs,
    )

    from onnxexec.capi.onnxruntime_inference_collection import (
        check_and_normalize_provider_args as ours,
    )

    valid = ["a", "b", "c"]
    for args in [
        (None, None),
        (["a", "b"], None),
        ([("a", {1: 2}), "b"], None),
        (["a", "b"], [{1: 2}, {}]),
    ]:
        assert ours(*args, valid) == theirs(*args, valid)
    for bad in [
        (3, None),
        ([3], None),
        (["a"], 3),
        (["a"], ["x"]),
        (["a", "b"], [{}]),
        ([("a", {})], [{}]),
    ]:
        with pytest.raises(ValueError):
            theirs(*bad, valid)
        with pytest.raises(ValueError):
            ours(*bad, valid)


def test_run_async_calls_back_with_results_and_user_data():
    s = onnxexec.InferenceSession(models.mul().SerializeToString())
    done = threading.Event()
    got = {}

    def callback(res, data, err):
        got.update(res=res, data=data, err=err)
        done.set()

    s.run_async(["Y"], {"X": X}, callback, "token")
    assert done.wait(30)
    assert got["err"] == "" and got["data"] == "token"
    np.testing.assert_array_equal(got["res"][0], X * models.W)
    done.clear()
    s.run_async(["Y"], {}, callback, None)  # a failing run reports its error
    assert done.wait(30)
    assert got["res"] == [] and "Required inputs" in got["err"]


def test_profiling_start_time_and_onnxruntime_style_file(tmp_path):
    opts = onnxexec.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "prof")
    starts = []
    for _ in range(2):
        s = onnxexec.InferenceSession(models.mul().SerializeToString(), opts)
        starts.append(s.get_profiling_start_time_ns())
        s.run(None, {"X": X})
        path = s.end_profiling()
        text = pathlib.Path(path).read_text()
        events = json.loads(text)
        lines = text.splitlines()  # onnxruntime's layout: one event per line
        assert lines[0] == "[" and lines[-1] == "]" and len(lines) == len(events) + 2
        assert {e["name"] for e in events} >= {
            "model_loading_uri",
            "session_initialization",
            "model_run",
        }
        assert all({"pid", "dur", "ts", "ph", "name", "args"} <= set(e) for e in events)
    assert 0 < starts[0] <= starts[1]
    assert (
        onnxexec.InferenceSession(models.mul().SerializeToString()).get_profiling_start_time_ns()
        == 0
    )


def test_modelmeta_is_complete(tmp_path):
    m = models.mul(producer_name="maker", doc_string="about", domain="ai.example", model_version=7)
    m.graph.doc_string = "graph doc"
    onnx.helper.set_model_props(m, {"author": "me", "license": "MIT"})
    data = m.SerializeToString()
    theirs, ours = (
        ort.InferenceSession(data).get_modelmeta(),
        onnxexec.InferenceSession(data).get_modelmeta(),
    )
    for field in (
        "producer_name",
        "graph_name",
        "domain",
        "description",
        "graph_description",
        "version",
    ):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert (
        ours.custom_metadata_map == theirs.custom_metadata_map == {"author": "me", "license": "MIT"}
    )


def test_model_sources_and_memory_infos(tmp_path):
    path = models.mul(tmp_path)
    for source in (path, pathlib.Path(path), pathlib.Path(path).read_bytes(), models.mul()):
        s = onnxexec.InferenceSession(source)
        np.testing.assert_array_equal(s.run(None, {"X": X})[0], X * models.W)
    assert [i.name for i in s.get_input_memory_infos()] == ["Cpu"]
    assert len(s.get_output_memory_infos()) == 1 and s.get_input_epdevices() == [None]


def test_graph_assignment_info_needs_the_config_entry():
    data = models.add_mul_add().SerializeToString()
    with pytest.raises(C.Fail, match=r"session\.record_ep_graph_assignment_info"):
        onnxexec.InferenceSession(data).get_provider_graph_assignment_info()
    opts = onnxexec.SessionOptions()
    opts.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    subgraphs = onnxexec.InferenceSession(data, opts).get_provider_graph_assignment_info()
    nodes = sorted(f"{n.domain}:{n.op_type}/{n.name}" for s in subgraphs for n in s.get_nodes())
    assert nodes == [":Add/add_0", ":Add/add_1", ":Mul/mul_0"]
    assert {s.ep_name for s in subgraphs} == {"CPUExecutionProvider"}
