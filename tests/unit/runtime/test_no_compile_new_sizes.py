"""After a session's first run, new batch sizes and sequence lengths load or compile no
kernel (issue 21): kernels specialize on dtype, rank and layout, never on sizes, so
the overloads ready after the first run serve later sizes. Outputs are checked
against onnxruntime at each size.

The sizes stay on one path: much larger ones switch paths (the native thread pool's
kernels, the wide im2col), whose kernels are still loaded by the first run taking
them; a compile there is said on stderr (kernels/objload/watch.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxexec.kernels.objload import watch

ort = pytest.importorskip("onnxruntime")


def _conv_model() -> bytes:
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], rng.standard_normal(216))
    dw = helper.make_tensor("dw", TensorProto.FLOAT, [8, 1, 3, 3], rng.standard_normal(72))
    fc = helper.make_tensor("fc", TensorProto.FLOAT, [8, 4], rng.standard_normal(32))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "dw"], ["d"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["d"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["m"]),
        helper.make_node("Softmax", ["m"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "h"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [w, dw, fc],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _attention_model() -> bytes:
    rng = np.random.default_rng(1)
    wq = helper.make_tensor("wq", TensorProto.FLOAT, [16, 16], rng.standard_normal(256) * 0.2)
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "xt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["a"], axis=-1),
        helper.make_node("MatMul", ["a", "x"], ["o"]),
        helper.make_node("LayerNormalization", ["o", "g"], ["y"], axis=-1),
    ]
    g = helper.make_tensor("g", TensorProto.FLOAT, [16], np.ones(16))
    graph = helper.make_graph(
        nodes,
        "attn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "t", 16])],
        [wq, g],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize(
    ("make", "shapes"),
    [
        (_conv_model, [(1, 3, 8, 8), (2, 3, 8, 8), (5, 3, 12, 12), (3, 3, 9, 9)]),
        (_attention_model, [(1, 4, 16), (1, 1, 16), (3, 37, 16), (2, 20, 16)]),
    ],
    ids=["conv", "attention"],
)
def test_new_sizes_after_the_first_run_add_no_kernel(make, shapes) -> None:
    import onnxexec

    model = make()
    onnx.checker.check_model(onnx.load_from_string(model))
    sess = onnxexec.InferenceSession(model)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    ready = compiles = None
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, ref.run(None, {"x": x})[0], rtol=2e-5, atol=2e-5)
        if ready is None:  # the first run made its kernels ready
            ready, compiles = watch.ready_overloads(), watch.compiles()
    assert (watch.ready_overloads(), watch.compiles()) == (ready, compiles)
