from __future__ import annotations

import numpy as np

from onnxexec.passes.cse import cse
from onnxexec.passes.eliminate import eliminate_dead
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


def test_duplicates_merged() -> None:
    g = graph(
        [
            node("Mul", ["x", "c1"], ["a"]),
            node("Mul", ["x", "c2"], ["b"]),  # c2 == c1 by value
            node("Add", ["a", "b"], ["y"]),
        ],
        [("x", [3])],
        ["y"],
        {"c1": np.float32([2, 3, 4]), "c2": np.float32([2, 3, 4])},
    )
    out = eliminate_dead(cse(g))
    assert ops(out) == ["Mul", "Add"]
    assert out.nodes[1].inputs == ("a", "a")
    assert_same_outputs(g, out, {"x": rand(3)})


def test_different_attributes_not_merged() -> None:
    g = graph(
        [
            node("Transpose", ["x"], ["a"], perm=[1, 0]),
            node("Transpose", ["x"], ["b"], perm=[0, 1]),
            node("Add", ["a", "b"], ["y"]),
        ],
        [("x", [3, 3])],
        ["y"],
    )
    assert cse(g) is g


def test_chains_merge_and_a_graph_without_duplicates_is_returned_as_is() -> None:
    nodes = [
        node("Relu", ["x"], ["a"]),
        node("Relu", ["x"], ["b"]),
        node("Neg", ["a"], ["c"]),
        node("Neg", ["b"], ["d"]),  # equal to c only once b is renamed to a
        node("Add", ["c", "d"], ["y"]),
    ]
    g = graph(nodes, [("x", [3])], ["y"])
    out = eliminate_dead(cse(g))
    assert ops(out) == ["Relu", "Neg", "Add"]
    assert out.nodes[2].inputs == ("c", "c")
    assert_same_outputs(g, out, {"x": rand(3)})
    assert cse(out) is out
    # An overridable initializer (also a graph input) is no constant to merge.
    h = graph(
        [node("Mul", ["x", "c1"], ["a"]), node("Mul", ["x", "c2"], ["y"])],
        [("x", [3]), ("c2", [3])],
        ["a", "y"],
        {"c1": np.float32([2, 3, 4]), "c2": np.float32([2, 3, 4])},
    )
    assert cse(h) is h
