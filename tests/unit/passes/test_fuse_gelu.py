from __future__ import annotations

import math

import numpy as np

from onnxexec.passes.fuse_gelu import fuse_gelu
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand, run

C = {"sqrt2": np.float32(math.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}


def test_erf_form_both_associations() -> None:
    a = graph(
        [
            node("Div", ["x", "sqrt2"], ["u"]),
            node("Erf", ["u"], ["e"]),
            node("Add", ["e", "one"], ["p"]),
            node("Mul", ["x", "p"], ["m"]),
            node("Mul", ["m", "half"], ["y"]),
        ],
        [("x", [4, 8])],
        ["y"],
        C,
    )
    b = graph(
        [
            node("Mul", ["x", "half"], ["h"]),
            node("Div", ["x", "sqrt2"], ["u"]),
            node("Erf", ["u"], ["e"]),
            node("Add", ["one", "e"], ["p"]),
            node("Mul", ["h", "p"], ["y"]),
        ],
        [("x", [4, 8])],
        ["y"],
        C,
    )
    x = rand(4, 8, scale=3)
    ref = 0.5 * x * (1 + np.vectorize(math.erf)(x.astype(np.float64) / math.sqrt(2)))
    for g in (a, b):
        out = fuse_gelu(g)
        assert ops(out) == ["FusedGelu"] and out.nodes[0].attrs["approximate"] == "none"
        np.testing.assert_allclose(run(out, {"x": x})[0], ref, atol=2e-6)


def test_tanh_form() -> None:
    g = graph(
        [
            node("Pow", ["x", "three"], ["x3"]),
            node("Mul", ["x3", "k"], ["kx3"]),
            node("Add", ["x", "kx3"], ["s"]),
            node("Mul", ["s", "c"], ["t0"]),
            node("Tanh", ["t0"], ["t"]),
            node("Add", ["t", "one"], ["p"]),
            node("Mul", ["half", "x"], ["h"]),
            node("Mul", ["h", "p"], ["y"]),
        ],
        [("x", [3, 5])],
        ["y"],
        {
            **C,
            "three": np.float32(3),
            "k": np.float32(0.044715),
            "c": np.float32(math.sqrt(2 / math.pi)),
        },
    )
    out = fuse_gelu(g)
    assert ops(out) == ["FusedGelu"] and out.nodes[0].attrs["approximate"] == "tanh"
    assert_same_outputs(g, out, {"x": rand(3, 5, scale=3)}, atol=2e-6)


def test_bias_gelu_op() -> None:
    g = graph(
        [node("Add", ["x", "b"], ["a"]), node("Gelu", ["a"], ["y"])],
        [("x", [2, 6])],
        ["y"],
        {"b": rand(6, seed=1)},
        opset=20,
    )
    out = fuse_gelu(g)
    assert ops(out) == ["FusedGelu"] and out.nodes[0].inputs == ("x", out.nodes[0].inputs[1])
    assert_same_outputs(g, out, {"x": rand(2, 6, seed=2)}, atol=2e-6)


def test_wrong_constant_untouched() -> None:
    g = graph(
        [
            node("Div", ["x", "sqrt2"], ["u"]),
            node("Erf", ["u"], ["e"]),
            node("Add", ["e", "one"], ["p"]),
            node("Mul", ["x", "p"], ["m"]),
            node("Mul", ["m", "six"], ["y"]),
        ],
        [("x", [4])],
        ["y"],
        {**C, "six": np.float32(0.6)},
    )
    assert fuse_gelu(g) is g
