from __future__ import annotations

import numpy as np

from onnxexec.passes.fuse_matmul import fuse_matmul
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


def test_matmul_bias_fused() -> None:
    g = graph(
        [node("MatMul", ["x", "w"], ["h"]), node("Add", ["b", "h"], ["y"])],
        [("x", ["b", 5, 8])],
        ["y"],
        {"w": rand(8, 6), "b": rand(6, seed=1)},
    )
    out = fuse_matmul(g)
    assert ops(out) == ["FusedMatMul"] and out.nodes[0].domain == "onnxexec"
    assert out.nodes[0].inputs == ("x", "w", "b")
    assert out.opset("onnxexec") == 1
    assert_same_outputs(g, out, {"x": rand(2, 5, 8, seed=2)})


def test_gemm_trans_b_with_bias() -> None:
    g = graph(
        [node("Gemm", ["x", "w", "c"], ["y"], transB=1, beta=0.5)],
        [("x", [3, 4])],
        ["y"],
        {"w": rand(6, 4), "c": rand(6, seed=3)},
    )
    out = fuse_matmul(g)
    assert ops(out) == ["FusedMatMul"] and out.nodes[0].attrs["transB"] == 1
    assert_same_outputs(g, out, {"x": rand(3, 4, seed=4)})


def test_full_bias_matrix_not_folded() -> None:
    # a (M, N) addend is not a per-column bias: MatMul is converted, the Add stays
    g = graph(
        [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "c"], ["y"])],
        [("x", [3, 4])],
        ["y"],
        {"w": rand(4, 5), "c": rand(3, 5)},
    )
    out = fuse_matmul(g)
    assert ops(out) == ["FusedMatMul", "Add"]
    assert_same_outputs(g, out, {"x": rand(3, 4, seed=5)})


def test_double_and_alpha_gemm_untouched() -> None:
    g = graph(
        [node("Gemm", ["x", "w"], ["y"], alpha=2.0)], [("x", [3, 4])], ["y"], {"w": rand(4, 2)}
    )
    assert fuse_matmul(g) is g
    gd = graph(
        [node("MatMul", ["x", "w"], ["y"])],
        [("x", [3, 4])],
        ["y"],
        {"w": rand(4, 2).astype(np.float64)},
        elem=11,
    )
    assert fuse_matmul(gd) is gd


def test_flatten_matmul_restore_collapses() -> None:
    # GPT-2 Conv1D: x (b, t, 8) -> (-1, 8) @ W + b -> (b, t, 6), restore shape computed
    g = graph(
        [
            node("Shape", ["x"], ["s"]),
            node("Slice", ["s", "z", "two"], ["bt"]),
            node("Concat", ["bt", "six"], ["target"], axis=0),
            node("Reshape", ["x", "flat"], ["x2"]),
            node("Gemm", ["x2", "w", "c"], ["h"]),
            node("Reshape", ["h", "target"], ["y"]),
        ],
        [("x", ["b", "t", 8])],
        ["y"],
        {
            "flat": np.array([-1, 8], np.int64),
            "w": rand(8, 6),
            "c": rand(6, seed=1),
            "z": np.array([0], np.int64),
            "two": np.array([2], np.int64),
            "six": np.array([6], np.int64),
        },
    )
    from onnxexec.passes.pipeline import optimize

    out = optimize(g, 2)
    assert ops(out) == ["FusedMatMul"] and out.nodes[0].inputs[0] == "x"
    for shape in ((2, 3, 8), (1, 5, 8)):
        assert_same_outputs(g, out, {"x": rand(*shape, seed=2)})
