from __future__ import annotations

import numpy as np

from onnxexec.passes.fuse_layernorm import fuse_layernorm
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand

I64 = np.int64


def _decomposed_ln(axis: int = -1) -> object:
    return graph(
        [
            node("ReduceMean", ["x"], ["m"], axes=[axis]),
            node("Sub", ["x", "m"], ["d"]),
            node("Pow", ["d", "two"], ["d2"]),
            node("ReduceMean", ["d2"], ["v"], axes=[axis]),
            node("Add", ["v", "eps"], ["ve"]),
            node("Sqrt", ["ve"], ["sd"]),
            node("Div", ["d", "sd"], ["n"]),
            node("Mul", ["n", "g"], ["ng"]),
            node("Add", ["ng", "b"], ["y"]),
        ],
        [("x", ["b", 4, 6])],
        ["y"],
        {"two": np.float32(2), "eps": np.float32(1e-5), "g": rand(6, seed=1), "b": rand(6, seed=2)},
        opset=13,
    )


def test_decomposed_layernorm() -> None:
    g = _decomposed_ln()
    out = fuse_layernorm(g)
    assert ops(out) == ["FusedLayerNorm"]
    assert out.nodes[0].inputs == ("x", "g", "b")
    assert abs(out.nodes[0].attrs["epsilon"] - 1e-5) < 1e-12
    assert_same_outputs(g, out, {"x": rand(2, 4, 6, scale=3)}, atol=1e-5)


def test_not_last_axis_untouched() -> None:
    g = _decomposed_ln(axis=1)
    assert fuse_layernorm(g) is g


def test_layernormalization_op() -> None:
    g = graph(
        [node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-6)],
        [("x", [3, 8])],
        ["y"],
        {"g": rand(8), "b": rand(8, seed=1)},
    )
    out = fuse_layernorm(g)
    assert ops(out) == ["FusedLayerNorm"]
    assert_same_outputs(g, out, {"x": rand(3, 8, seed=2)}, atol=1e-5)


def test_rmsnorm_llama_form() -> None:
    g = graph(
        [
            node("Pow", ["x", "two"], ["x2"]),
            node("ReduceMean", ["x2", "axes"], ["v"]),
            node("Add", ["v", "eps"], ["ve"]),
            node("Sqrt", ["ve"], ["sd"]),
            node("Reciprocal", ["sd"], ["inv"]),
            node("Mul", ["x", "inv"], ["n"]),
            node("Mul", ["w", "n"], ["y"]),
        ],
        [("x", [2, 5, 8])],
        ["y"],
        {
            "two": np.float32(2),
            "axes": np.array([-1], I64),
            "eps": np.float32(1e-6),
            "w": rand(8, seed=3),
        },
        opset=18,
    )
    out = fuse_layernorm(g)
    assert ops(out) == ["FusedRMSNorm"] and out.nodes[0].inputs == ("x", "w")
    x = rand(2, 5, 8, seed=4)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * rand(8, seed=3)
    from tests.unit.passes._graphs import run

    np.testing.assert_allclose(run(out, {"x": x})[0], ref, rtol=1e-5, atol=1e-6)
    assert_same_outputs(g, out, {"x": x}, atol=1e-5)
