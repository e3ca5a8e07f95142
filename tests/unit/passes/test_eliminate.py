from __future__ import annotations

import numpy as np

from onnxexec.passes.eliminate import eliminate_dead, eliminate_noops
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


def test_identity_dropout_and_noop_cast_removed() -> None:
    g = graph(
        [
            node("Identity", ["x"], ["a"]),
            node("Dropout", ["a"], ["b"]),
            node("Cast", ["b"], ["c"], to=1),
            node("Relu", ["c"], ["y"]),
        ],
        [("x", [3, 4])],
        ["y"],
        opset=13,
    )
    out = eliminate_noops(g)
    assert ops(out) == ["Relu"]
    assert out.nodes[0].inputs == ("x",)
    assert_same_outputs(g, out, {"x": rand(3, 4)})


def test_graph_output_name_survives() -> None:
    g = graph([node("Relu", ["x"], ["r"]), node("Identity", ["r"], ["y"])], [("x", [2])], ["y"])
    out = eliminate_noops(g)
    assert ops(out) == ["Relu"] and out.nodes[0].outputs == ("y",)
    assert_same_outputs(g, out, {"x": rand(2)})


def test_real_cast_and_training_dropout_kept() -> None:
    g = graph(
        [
            node("Cast", ["x"], ["d"], to=11),
            node("Dropout", ["x", "r", "train"], ["y"]),
        ],
        [("x", [2]), ("train", [])],
        ["d", "y"],
        {"r": np.float32(0.5).reshape(())},
        opset=13,
    )
    assert eliminate_noops(g) is g


def test_dead_nodes_and_initializers_dropped() -> None:
    g = graph(
        [
            node("Neg", ["x"], ["unused"]),
            node("Add", ["x", "c"], ["y"]),
            node("Mul", ["x", "c2"], ["also_unused"]),
        ],
        [("x", [2])],
        ["y"],
        {"c": np.ones(2, np.float32), "c2": np.ones(2, np.float32)},
    )
    out = eliminate_dead(g)
    assert ops(out) == ["Add"] and set(out.initializers) == {"c"}
    assert eliminate_dead(out) is out
