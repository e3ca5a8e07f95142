from __future__ import annotations

import numpy as np

from onnxexec.passes.fuse_rope import fuse_rope
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand

I64 = np.int64
C = {
    "zero": np.array([0], I64),
    "half": np.array([4], I64),
    "big": np.array([2**63 - 1], I64),
    "ax": np.array([-1], I64),
    "ax3": np.array([3], I64),
    "one": np.array([1], I64),
    "three": np.array([3], I64),
}


def _rope_graph(s1=("zero", "half"), s2=("half", "big"), swap=False, ax="ax", extra=False):
    mul1 = node("Mul", ["cos", "x"] if swap else ["x", "cos"], ["xc"])
    mul2 = node("Mul", ["sin", "rot"] if swap else ["rot", "sin"], ["rs"])
    nodes = [
        node("Slice", ["x", s1[0], s1[1], ax, "one"], ["x1"]),
        node("Slice", ["x", s2[0], s2[1], ax], ["x2"]),
        node("Neg", ["x2"], ["nx2"]),
        node("Concat", ["nx2", "x1"], ["rot"], axis=-1),
        mul1,
        mul2,
        node("Add", ["rs", "xc"] if swap else ["xc", "rs"], ["y"]),
    ]
    outs = ["y", "rot"] if extra else ["y"]
    return graph(
        nodes, [("x", [2, 3, 5, 8]), ("cos", [1, 1, 5, 8]), ("sin", [1, 1, 5, 8])], outs, C
    )


def _feeds():
    return {"x": rand(2, 3, 5, 8), "cos": rand(1, 1, 5, 8, seed=1), "sin": rand(1, 1, 5, 8, seed=2)}


def test_rotate_half_fused_both_orders() -> None:
    for g in (_rope_graph(), _rope_graph(swap=True), _rope_graph(ax="ax3")):
        out = fuse_rope(g)
        assert ops(out) == ["FusedRotary"]
        assert_same_outputs(g, out, _feeds(), rtol=0, atol=0)


def test_rotate_half_against_formula() -> None:
    f = _feeds()
    x, c, s = f["x"].astype(np.float64), f["cos"], f["sin"]
    rot = np.concatenate([-x[..., 4:], x[..., :4]], axis=-1)
    from tests.unit.passes._graphs import run

    got = run(fuse_rope(_rope_graph()), f)[0]
    np.testing.assert_allclose(got, x * c + rot * s, rtol=1e-6, atol=1e-6)


def test_not_fused_when_halves_wrong_or_shared() -> None:
    for g in (
        _rope_graph(s1=("zero", "three")),  # x[..., :3] is not the first half
        _rope_graph(s2=("three", "big")),
        _rope_graph(extra=True),  # the rotated tensor is also a graph output
    ):
        out = fuse_rope(g)
        assert "FusedRotary" not in ops(out)
        assert out is g


def test_rope_then_attention_both_fuse() -> None:
    """Rotated q / k still feed an attention fusion (FusedRotary has a shape rule)."""
    from onnxexec.passes.pipeline import optimize

    nodes = []
    for t in ("q", "k"):
        nodes += [
            node("Slice", [t, "zero", "half", "ax"], [f"{t}1"]),
            node("Slice", [t, "half", "big", "ax"], [f"{t}2"]),
            node("Neg", [f"{t}2"], [f"n{t}2"]),
            node("Concat", [f"n{t}2", f"{t}1"], [f"{t}rot"], axis=-1),
            node("Mul", [t, "cos"], [f"{t}c"]),
            node("Mul", [f"{t}rot", "sin"], [f"{t}s"]),
            node("Add", [f"{t}c", f"{t}s"], [f"{t}r"]),
        ]
    nodes += [
        node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
        node("MatMul", ["qr", "kt"], ["s0"]),
        node("Mul", ["s0", "scale"], ["s"]),
        node("Softmax", ["s"], ["p"], axis=-1),
        node("MatMul", ["p", "v"], ["y"]),
    ]
    shape = [1, 2, 5, 8]
    g = graph(
        nodes,
        [("q", shape), ("k", shape), ("v", shape), ("cos", [1, 1, 5, 8]), ("sin", [1, 1, 5, 8])],
        ["y"],
        {**C, "scale": np.array(0.35, np.float32)},
    )
    out = optimize(g, 2)
    assert sorted(ops(out)) == ["FusedAttention", "FusedRotary", "FusedRotary", "Transpose"]
    feeds = {
        "q": rand(*shape),
        "k": rand(*shape, seed=1),
        "v": rand(*shape, seed=2),
        "cos": rand(1, 1, 5, 8, seed=3),
        "sin": rand(1, 1, 5, 8, seed=4),
    }
    assert_same_outputs(g, out, feeds, rtol=1e-5, atol=1e-6)
