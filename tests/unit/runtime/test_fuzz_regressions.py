"""Models the fuzzer (tests/fuzz) turned into a process abort or a hang: each must end
in one clean error instead."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxexec as ox
from onnxexec.errors import InvalidGraphError, NodeExecutionError

F = TensorProto.FLOAT


def _model(node, x_shape: list) -> bytes:
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, x_shape)],
        [helper.make_tensor_value_info("y", F, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_a_negative_declared_dimension_is_refused_before_onnx_inference() -> None:
    # onnx's C++ Slice inference asserts (std::clamp) and aborts the process on such a
    # shape; validation must refuse it first, naming the input and the dimension
    starts = helper.make_tensor("st", TensorProto.INT64, [1], [1])
    ends = helper.make_tensor("en", TensorProto.INT64, [1], [5])
    node = helper.make_node("Slice", ["x", "st", "en"], ["y"], name="slice0")
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", F, [2, -3, 6])],
        [helper.make_tensor_value_info("y", F, None)],
        [starts, ends],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    with pytest.raises(InvalidGraphError, match=r"'x'.*-3 is negative"):
        ox.InferenceSession(m.SerializeToString())


@pytest.mark.parametrize("shape", [[1, 1, 8, 8], [1, 1, "h", "w"]])
@pytest.mark.parametrize("k", [10, 2**40, 2**62 - 1])
def test_a_pool_window_larger_than_its_input_is_an_error_as_in_onnxruntime(
    shape: list, k: int
) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = _model(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, 2]), shape)
    x = np.ones((1, 1, 8, 8), np.float32)
    with pytest.raises(Exception, match="negative"):
        ort.InferenceSession(model).run(None, {"x": x})
    with pytest.raises(NodeExecutionError, match="output dimension 0 is negative"):
        ox.InferenceSession(model).run(None, {"x": x})


def test_a_window_one_longer_than_its_input_gives_an_empty_output_as_in_onnxruntime() -> None:
    ort = pytest.importorskip("onnxruntime")
    model = _model(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[9, 2]), [1, 1, 8, 8])
    x = np.ones((1, 1, 8, 8), np.float32)
    (want,) = ort.InferenceSession(model).run(None, {"x": x})
    (got,) = ox.InferenceSession(model).run(None, {"x": x})
    assert got.shape == want.shape == (1, 1, 0, 7)
