from __future__ import annotations

from onnxexec.passes.fuse_layernorm import fuse_layernorm
from onnxexec.passes.fuse_skip_norm import fuse_skip_norm
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


def test_residual_add_becomes_skip_with_sum_output() -> None:
    g = graph(
        [
            node("Add", ["x", "r"], ["h"]),
            node("LayerNormalization", ["h", "g", "b"], ["n"]),
            node("Add", ["h", "n"], ["y"]),
        ],
        [("x", ["b", 3, 8]), ("r", ["b", 3, 8])],
        ["y"],
        {"g": rand(8), "b": rand(8, seed=1)},
    )
    out = fuse_skip_norm(fuse_layernorm(g))
    assert ops(out) == ["FusedLayerNorm", "Add"]
    ln = out.nodes[0]
    assert ln.inputs == ("x", "g", "b", "r") and ln.outputs == ("n", "h")
    assert_same_outputs(g, out, {"x": rand(2, 3, 8, seed=2), "r": rand(2, 3, 8, seed=3)}, atol=1e-5)


def test_broadcasting_add_untouched() -> None:
    g = graph(
        [node("Add", ["x", "r"], ["h"]), node("LayerNormalization", ["h", "g"], ["y"])],
        [("x", [2, 3, 8]), ("r", [3, 8])],
        ["y"],
        {"g": rand(8)},
    )
    f = fuse_layernorm(g)
    assert fuse_skip_norm(f) is f
