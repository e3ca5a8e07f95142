from __future__ import annotations

import numpy as np

from onnxexec.passes.fuse_activation import fuse_activation
from onnxexec.passes.fuse_matmul import fuse_matmul
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


def test_conv_relu() -> None:
    g = graph(
        [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["y"])],
        [("x", [1, 2, 5, 5])],
        ["y"],
        {"w": rand(3, 2, 3, 3), "b": rand(3, seed=1)},
    )
    out = fuse_activation(g)
    assert ops(out) == ["FusedConv"] and out.nodes[0].attrs["activation"] == "Relu"
    assert_same_outputs(g, out, {"x": rand(1, 2, 5, 5, seed=2)})


def test_depthwise_conv_clip6() -> None:
    g = graph(
        [
            node("Conv", ["x", "w"], ["c"], group=4, strides=[2, 2], pads=[1, 1, 1, 1]),
            node("Clip", ["c", "lo", "hi"], ["y"]),
        ],
        [("x", [1, 4, 9, 9])],
        ["y"],
        {"w": rand(4, 1, 3, 3), "lo": np.float32(0), "hi": np.float32(6)},
    )
    out = fuse_activation(g)
    assert ops(out) == ["FusedConv"] and out.nodes[0].attrs["beta"] == 6.0
    assert_same_outputs(g, out, {"x": rand(1, 4, 9, 9, seed=3, scale=4)})


def test_matmul_bias_silu() -> None:
    g = graph(
        [
            node("MatMul", ["x", "w"], ["h"]),
            node("Add", ["h", "b"], ["a"]),
            node("Sigmoid", ["a"], ["s"]),
            node("Mul", ["a", "s"], ["y"]),
        ],
        [("x", [3, 4])],
        ["y"],
        {"w": rand(4, 5), "b": rand(5, seed=1)},
    )
    out = fuse_activation(fuse_matmul(g))
    assert ops(out) == ["FusedMatMul"] and out.nodes[0].attrs["activation"] == "Silu"
    assert_same_outputs(g, out, {"x": rand(3, 4, seed=4)})


def test_activation_after_plain_add_untouched() -> None:
    g = graph([node("Add", ["x", "x"], ["a"]), node("Relu", ["a"], ["y"])], [("x", [3])], ["y"])
    assert fuse_activation(g) is g


def test_shared_product_keeps_activation_separate() -> None:
    g = graph(
        [node("MatMul", ["x", "w"], ["h"]), node("Relu", ["h"], ["y"]), node("Neg", ["h"], ["z"])],
        [("x", [3, 4])],
        ["y", "z"],
        {"w": rand(4, 2)},
    )
    out = fuse_activation(fuse_matmul(g))
    assert ops(out) == ["FusedMatMul", "Relu", "Neg"]
    assert_same_outputs(g, out, {"x": rand(3, 4, seed=5)})


def test_conv_residual_add_relu() -> None:
    g = graph(
        [
            node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            node("Add", ["r", "c"], ["s"]),
            node("Relu", ["s"], ["y"]),
        ],
        [("x", [1, 2, 5, 5]), ("r", [1, 3, 5, 5])],
        ["y"],
        {"w": rand(3, 2, 3, 3), "b": rand(3, seed=1)},
    )
    out = fuse_activation(g)
    assert ops(out) == ["FusedConv"]
    assert (
        out.nodes[0].inputs == ("x", "w", "b", "r") and out.nodes[0].attrs["activation"] == "Relu"
    )
    assert_same_outputs(g, out, {"x": rand(1, 2, 5, 5, seed=2), "r": rand(1, 3, 5, 5, seed=3)})
    # a broadcasting addend is not a residual
    g2 = graph(
        [node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "r"], ["y"])],
        [("x", [1, 2, 5, 5]), ("r", [1, 3, 1, 1])],
        ["y"],
        {"w": rand(3, 2, 1, 1)},
    )
    assert ops(fuse_activation(g2)) == ["FusedConv", "Add"]
