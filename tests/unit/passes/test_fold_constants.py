from __future__ import annotations

import numpy as np

from onnxexec.passes.eliminate import eliminate_dead
from onnxexec.passes.fold_constants import fold_constants
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand, run


def test_constant_subgraph_becomes_initializer() -> None:
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = graph(
        [
            node("Constant", [], ["k"], value=__import__("onnx").numpy_helper.from_array(c)),
            node("Transpose", ["k"], ["kt"], perm=[1, 0]),
            node("Mul", ["kt", "two"], ["k2"]),
            node("MatMul", ["x", "k2"], ["y"]),
        ],
        [("x", [4, 3])],
        ["y"],
        {"two": np.float32(2.0).reshape(())},
    )
    out = eliminate_dead(fold_constants(g))
    assert ops(out) == ["MatMul"]
    folded = out.initializers[out.nodes[0].inputs[1]]
    np.testing.assert_array_equal(folded, c.T * 2)  # computed independently
    assert_same_outputs(g, out, {"x": rand(4, 3)})


def test_runtime_inputs_and_random_ops_are_left_alone() -> None:
    g = graph(
        [
            node("Add", ["x", "c"], ["y"]),
            node("RandomNormal", [], ["r"], shape=[2], seed=1.0),
            node("Shape", ["r"], ["s"]),
        ],
        [("x", [2])],
        ["y", "s"],
        {"c": np.ones(2, np.float32)},
    )
    assert fold_constants(g) is g


def test_folded_graph_output() -> None:
    g = graph(
        [node("Add", ["a", "b"], ["y"])],
        [],
        ["y"],
        {"a": np.float32([1, 2]), "b": np.float32([10, 20])},
    )
    out = fold_constants(g)
    assert ops(out) == []
    np.testing.assert_array_equal(run(out, {})[0], np.float32([11, 22]))


def test_overridable_initializer_is_not_constant() -> None:
    from onnx import TensorProto, helper, numpy_helper

    from onnxexec.loaders.onnx_proto import load_onnx

    gp = helper.make_graph(
        [node("Neg", ["w"], ["y"])],
        "t",
        [helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.float32([1, 2]), "w")],
    )
    g = load_onnx(helper.make_model(gp, opset_imports=[helper.make_opsetid("", 17)]))
    assert fold_constants(g) is g
