from __future__ import annotations

import numpy as np

from onnxexec.passes.fuse_elementwise import fuse_elementwise
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand, run


def test_chain_with_broadcast_inputs_fused() -> None:
    # y = tanh(x * cos + r * sin) / 2 - 1, cos/sin shared across the head axis
    g = graph(
        [
            node("Mul", ["x", "cos"], ["a"]),
            node("Mul", ["r", "sin"], ["b"]),
            node("Add", ["a", "b"], ["c"]),
            node("Tanh", ["c"], ["t"]),
            node("Div", ["t", "two"], ["h"]),
            node("Sub", ["h", "one"], ["y"]),
        ],
        [("x", [2, 3, 4, 8]), ("r", [2, 3, 4, 8]), ("cos", [1, 1, 4, 8]), ("sin", [4, 8])],
        ["y"],
        {"two": np.float32(2.0).reshape(()), "one": np.float32(1.0).reshape(())},
    )
    out = fuse_elementwise(g)
    assert ops(out) == ["FusedElementwise"]
    assert sorted(out.nodes[0].inputs) == ["cos", "r", "sin", "x"]
    assert out.nodes[0].attrs["constants"] == (2.0, 1.0)
    f = {
        "x": rand(2, 3, 4, 8),
        "r": rand(2, 3, 4, 8, seed=1),
        "cos": rand(1, 1, 4, 8, seed=2),
        "sin": rand(4, 8, seed=3),
    }
    want = np.tanh(f["x"].astype(np.float64) * f["cos"] + f["r"] * f["sin"]) / 2 - 1
    np.testing.assert_allclose(run(out, f)[0], want, rtol=1e-5, atol=1e-6)
    assert_same_outputs(g, out, f, atol=1e-6)


def test_unusual_broadcast_materialized() -> None:
    g = graph(
        [node("Mul", ["x", "s"], ["a"]), node("Relu", ["a"], ["y"])],
        [("x", [2, 3, 5]), ("s", [2, 1, 5])],
        ["y"],
    )
    out = fuse_elementwise(g)
    assert ops(out) == ["FusedElementwise"]
    assert_same_outputs(g, out, {"x": rand(2, 3, 5), "s": rand(2, 1, 5, seed=1)})


def test_shared_intermediate_or_single_op_untouched() -> None:
    g = graph(
        [node("Mul", ["x", "x"], ["a"]), node("Exp", ["a"], ["b"]), node("Add", ["a", "b"], ["y"])],
        [("x", [4])],
        ["y"],
    )
    # `a` feeds two chain members: still one chain (both consumers inside)... but its
    # use count is 2, so it stays a separate value and nothing is fused across it
    out = fuse_elementwise(g)
    assert_same_outputs(g, out, {"x": rand(4)})
    g1 = graph([node("Neg", ["x"], ["y"])], [("x", [4])], ["y"])
    assert fuse_elementwise(g1) is g1
