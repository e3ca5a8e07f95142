"""InferenceSession: onnxruntime-compatible API surface and feed validation."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxexec
from onnxexec.errors import InvalidFeedError
from tests.unit.helpers import make_model, tensor_info
from tests.unit.runtime.test_executor import TEST_OPSET

D = "onnxexec.test"


def _session(**kw):
    nodes = [
        helper.make_node("AddK", ["x"], ["y"], domain=D, k=1.0),
        helper.make_node("AddK", ["ids"], ["z"], domain=D, k=0.0),
    ]
    m = make_model(
        nodes,
        [tensor_info("x", shape=["batch", 3]), tensor_info("ids", TensorProto.FLOAT, [2])],
        [tensor_info("y", shape=["batch", 3]), tensor_info("z", shape=[2])],
        extra_opsets=[TEST_OPSET],
        producer_name="unit-test",
        doc_string="doc",
    )
    return onnxexec.InferenceSession(m.SerializeToString(), **kw)


def test_inputs_outputs_and_metadata_look_like_onnxruntime():
    s = _session(providers=["CPUExecutionProvider"])
    (x, ids) = s.get_inputs()
    assert (x.name, x.type, x.shape) == ("x", "tensor(float)", ["batch", 3])
    assert ids.shape == [2]
    assert [o.name for o in s.get_outputs()] == ["y", "z"]
    assert s.get_providers() == ["CPUExecutionProvider"]
    meta = s.get_modelmeta()
    assert meta.producer_name == "unit-test" and meta.description == "doc"


def test_run_selects_and_orders_outputs():
    s = _session()
    feed = {"x": np.zeros((2, 3), np.float32), "ids": np.ones(2, np.float32)}
    z, y = s.run(["z", "y"], feed)
    np.testing.assert_array_equal(y, np.ones((2, 3)))
    np.testing.assert_array_equal(z, np.ones(2))
    assert len(s.run(None, feed)) == 2


@pytest.mark.parametrize(
    ("feed", "match"),
    [
        (
            {"x": np.zeros((2, 3), np.float64), "ids": np.ones(2, np.float32)},
            r"input 'x': expected tensor\(float\), got float64",
        ),
        (
            {"x": np.zeros((2, 3), np.float32)},
            r"Required inputs \(\['ids'\]\) are missing from input feed \(\['x'\]\)",
        ),
        (
            {"x": np.zeros((2, 3), np.float32), "ids": np.ones(2, np.float32), "q": 1},
            r"unknown input name\(s\) \['q'\]",
        ),
        (
            {"x": np.zeros(3, np.float32), "ids": np.ones(2, np.float32)},
            r"input 'x': expected rank 2",
        ),
        (
            {"x": np.zeros((2, 4), np.float32), "ids": np.ones(2, np.float32)},
            r"input 'x': dimension 1 must be 3",
        ),
        ({"x": [[0.0, 0, 0]], "ids": ["a", "b"]}, r"input 'ids': expected tensor\(float\)"),
        ({"x": {"a": 1}, "ids": np.ones(2, np.float32)}, r"input 'x': expected a numpy array"),
    ],
)
def test_bad_feeds_are_rejected_with_the_input_named(feed, match):
    with pytest.raises(InvalidFeedError, match=match):
        _session().run(None, feed)


def test_unknown_output_name_and_provider():
    s = _session()
    with pytest.raises(InvalidFeedError, match="unknown output"):
        s.run(["nope"], {"x": np.zeros((1, 3), np.float32), "ids": np.ones(2, np.float32)})
    # as onnxruntime's CPU build: an unavailable provider is skipped with a warning
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        cuda_first = _session(providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert cuda_first.get_providers() == ["CPUExecutionProvider"]


def test_profiling_writes_onnxruntime_style_trace(tmp_path):
    import json

    opts = onnxexec.SessionOptions(
        enable_profiling=True, profile_file_prefix=str(tmp_path / "prof")
    )
    s = _session(sess_options=opts)
    s.run(None, {"x": np.zeros((1, 3), np.float32), "ids": np.ones(2, np.float32)})
    path = s.end_profiling()
    events = json.loads(open(path).read())
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(nodes) == 2 and all(e["ph"] == "X" and e["dur"] >= 0 for e in nodes)
    assert nodes[0]["args"]["op_name"] == "AddK"
    assert nodes[0]["args"]["input_type_shape"] == [{"float": [1, 3]}]
    assert {e["name"] for e in events if e["cat"] == "Session"} >= {
        "model_loading_uri",
        "session_initialization",
        "model_run",
    }
