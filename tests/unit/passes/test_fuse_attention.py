from __future__ import annotations

import numpy as np

from onnxexec.passes.eliminate import eliminate_dead
from onnxexec.passes.fuse_attention import fuse_attention
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand, run

I64 = np.int64


def _sdpa(softmax_axis: int = -1) -> object:
    """torch's SDPA export: Q and K^T each scaled by sqrt(scale), additive mask, NaN->0."""
    return graph(
        [
            node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            node("Mul", ["q", "s"], ["qs"]),
            node("Mul", ["kt", "s"], ["ks"]),
            node("MatMul", ["qs", "ks"], ["sc"]),
            node("Add", ["sc", "mask"], ["sm"]),
            node("Softmax", ["sm"], ["p"], axis=softmax_axis),
            node("IsNaN", ["p"], ["nan"]),
            node("Where", ["nan", "zero", "p"], ["pz"]),
            node("MatMul", ["pz", "v"], ["y"]),
        ],
        [
            ("q", ["b", 2, 5, 4]),
            ("k", ["b", 2, 5, 4]),
            ("v", ["b", 2, 5, 4]),
            ("mask", ["b", 1, 5, 5]),
        ],
        ["y"],
        {"s": np.float32(0.5**0.5), "zero": np.float32(0)},
    )


def _feeds(b: int = 2) -> dict:
    mask = np.where(np.random.default_rng(1).random((b, 1, 5, 5)) < 0.3, -np.inf, 0)
    mask[0, 0, 2] = -np.inf  # a fully masked row: NaN, then 0
    return {
        "q": rand(b, 2, 5, 4, seed=2),
        "k": rand(b, 2, 5, 4, seed=3),
        "v": rand(b, 2, 5, 4, seed=4),
        "mask": mask.astype(np.float32),
    }


def test_sdpa_fused() -> None:
    g = _sdpa()
    out = eliminate_dead(fuse_attention(g))
    # Q and K^T keep their own scale nodes: folded into one product of the scores, the
    # scales would overflow where the graph's separately rounded products do not
    assert ops(out) == ["Transpose", "Mul", "Mul", "FusedAttention"]
    fa = out.nodes[3]
    assert fa.inputs == ("qs", "ks", "v", "mask")
    assert fa.attrs["scale"] == 1.0 and fa.attrs["nan_to_zero"] == 1
    f = _feeds()
    y = run(out, f)[0]
    assert np.all(y[0, :, 2] == 0)  # fully masked row -> zeros, as Where(IsNaN) gives
    assert_same_outputs(g, out, f, atol=1e-6)


def test_other_softmax_axis_untouched() -> None:
    g = _sdpa(softmax_axis=2)
    assert fuse_attention(g) is g


def test_grouped_query_attention_reads_kv_heads() -> None:
    # transformers' repeat_kv: (B, 1, S, D) -> unsqueeze -> expand x2 -> (B, 2, S, D)
    g = graph(
        [
            node("Unsqueeze", ["k", "ax2"], ["k5"]),
            node("Expand", ["k5", "e"], ["ke"]),
            node("Reshape", ["ke", "r"], ["kr"]),
            node("Unsqueeze", ["v", "ax2"], ["v5"]),
            node("Expand", ["v5", "e"], ["ve"]),
            node("Reshape", ["ve", "r"], ["vr"]),
            node("Transpose", ["kr"], ["kt"], perm=[0, 1, 3, 2]),
            node("MatMul", ["q", "kt"], ["sc"]),
            node("Div", ["sc", "d"], ["sd"]),
            node("Softmax", ["sd"], ["p"], axis=-1),
            node("MatMul", ["p", "vr"], ["y"]),
        ],
        [("q", [1, 2, 3, 4]), ("k", [1, 1, 3, 4]), ("v", [1, 1, 3, 4])],
        ["y"],
        {
            "ax2": np.array([2], I64),
            "e": np.array([1, 1, 2, 3, 4], I64),
            "r": np.array([1, 2, 3, 4], I64),
            "d": np.float32(2.0),
        },
    )
    out = fuse_attention(g)
    fused = out.nodes[-1]
    assert fused.op_type == "FusedAttention" and fused.inputs[2] == "v"
    assert abs(fused.attrs["scale"] - 0.5) < 1e-7 and len(fused.inputs) == 3
    assert_same_outputs(
        g,
        out,
        {"q": rand(1, 2, 3, 4), "k": rand(1, 1, 3, 4, seed=1), "v": rand(1, 1, 3, 4, seed=2)},
        atol=1e-6,
    )


def test_dynamo_k_transpose_through_3d_reshapes() -> None:
    # dynamo: K^T = Reshape(Transpose(Reshape(k, (-1, S, D)), (0, 2, 1)), (B, H, D, S))
    g = graph(
        [
            node("Reshape", ["k", "s3"], ["k3"]),
            node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
            node("Reshape", ["k3t", "s4"], ["kt"]),
            node("MatMul", ["q", "kt"], ["sc"]),
            node("Softmax", ["sc"], ["p"], axis=-1),
            node("MatMul", ["p", "v"], ["y"]),
        ],
        [("q", [1, 2, 3, 4]), ("k", [1, 2, 3, 4]), ("v", [1, 2, 3, 4])],
        ["y"],
        {"s3": np.array([-1, 3, 4], I64), "s4": np.array([1, 2, 4, 3], I64)},
    )
    out = eliminate_dead(fuse_attention(g))
    assert ops(out) == ["Transpose", "FusedAttention"]
    assert_same_outputs(
        g,
        out,
        {"q": rand(1, 2, 3, 4), "k": rand(1, 2, 3, 4, seed=1), "v": rand(1, 2, 3, 4, seed=2)},
        atol=1e-6,
    )
