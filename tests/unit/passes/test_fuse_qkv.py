"""Pass fuse_qkv (sibling products -> FusedMatMulGroup) and pass pack_weights:
optimized vs unoptimized outputs on graphs that do and don't match."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.linalg import sgemm_packed
from onnxexec.passes import pack_weights as pack_weights_pass
from onnxexec.passes.fuse_activation import fuse_activation
from onnxexec.passes.fuse_matmul import fuse_matmul
from onnxexec.passes.fuse_qkv import fuse_qkv
from onnxexec.passes.pack_weights import pack_weights
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


@pytest.fixture(autouse=True)
def _packing_on(monkeypatch):
    # forced on (also on AVX2 hosts) and for the tests' small weights
    monkeypatch.setenv("ONNXEXEC_PACK_WEIGHTS", "1")
    monkeypatch.setattr(pack_weights_pass, "_MIN_SIZE", 0)


def _fused(g):
    return fuse_activation(fuse_matmul(g))


def _qkv_graph():
    # BERT-like: three biased projections of one input; Llama-like: gate (Silu) + up
    return graph(
        [
            node("MatMul", ["x", "wq"], ["q0"]),
            node("Add", ["q0", "bq"], ["q"]),
            node("MatMul", ["x", "wk"], ["k0"]),
            node("Add", ["k0", "bk"], ["k"]),
            node("MatMul", ["x", "wv"], ["v"]),
            node("MatMul", ["x", "wg"], ["g0"]),
            node("Sigmoid", ["g0"], ["s"]),
            node("Mul", ["g0", "s"], ["g"]),
            node("MatMul", ["x", "wu"], ["u"]),
            node("Mul", ["g", "u"], ["y"]),
            node("Relu", ["v"], ["vr"]),
        ],
        [("x", [1, "t", 24])],
        ["q", "k", "vr", "y"],
        {
            "wq": rand(24, 16, seed=1),
            "bq": rand(16, seed=2),
            "wk": rand(24, 8, seed=3),
            "bk": rand(8, seed=4),
            "wv": rand(24, 8, seed=5),
            "wg": rand(24, 40, seed=6),
            "wu": rand(24, 40, seed=7),
        },
    )


def test_siblings_merged_into_one_group() -> None:
    g = _fused(_qkv_graph())
    assert ops(g).count("FusedMatMul") == 5
    out = fuse_qkv(g)
    groups = [n for n in out.nodes if n.op_type == "FusedMatMulGroup"]
    # v took Relu (a second activation): it stays a FusedMatMul of its own
    assert len(groups) == 1 and ops(out).count("FusedMatMul") == 1
    grp = groups[0]
    # the Silu member goes first: one activated column range
    assert grp.attrs["activation"] == "Silu" and grp.attrs["activated"] == 1
    assert grp.attrs["splits"] == (40, 16, 8, 40)
    assert grp.outputs == ("g", "q", "k", "u")
    w = out.initializers[grp.inputs[1]]
    assert w.shape == (24, 104)
    assert "wq" not in out.initializers  # the members' own weights are dropped
    feeds = {"x": rand(1, 5, 24, seed=9)}
    assert_same_outputs(_qkv_graph(), out, feeds, rtol=1e-4, atol=1e-5)
    if sgemm_packed.AVAILABLE:
        packed = pack_weights(out)
        grp = next(n for n in packed.nodes if n.op_type == "FusedMatMulGroup")
        assert grp.attrs["packed"] == 104
        nr = sgemm_packed.NR
        assert packed.initializers[grp.inputs[1]].shape == (-(-104 // nr), 24, nr)
        assert_same_outputs(_qkv_graph(), packed, feeds, rtol=1e-4, atol=1e-5)


def test_no_match_left_alone() -> None:
    # different inputs, a run-time weight, a lone product: nothing to merge
    g = graph(
        [
            node("MatMul", ["x", "w1"], ["a"]),
            node("MatMul", ["z", "w2"], ["b"]),
            node("MatMul", ["x", "z2"], ["c"]),
        ],
        [("x", [3, 6]), ("z", [3, 6]), ("z2", [6, 4])],
        ["a", "b", "c"],
        {"w1": rand(6, 5), "w2": rand(6, 5, seed=1)},
    )
    f = _fused(g)
    assert fuse_qkv(f) is f


def test_two_activations_keep_one_out() -> None:
    # Relu and Gelu members cannot share one activated range: one stays separate
    g = graph(
        [
            node("MatMul", ["x", "w1"], ["a0"]),
            node("Relu", ["a0"], ["a"]),
            node("MatMul", ["x", "w2"], ["b0"]),
            node("Tanh", ["b0"], ["b"]),
            node("MatMul", ["x", "w3"], ["c"]),
        ],
        [("x", [4, 6])],
        ["a", "b", "c"],
        {"w1": rand(6, 5), "w2": rand(6, 7, seed=1), "w3": rand(6, 3, seed=2)},
    )
    out = fuse_qkv(_fused(g))
    assert sorted(ops(out)) == ["FusedMatMul", "FusedMatMulGroup"]
    assert_same_outputs(g, out, {"x": rand(4, 6, seed=3)}, rtol=1e-4, atol=1e-5)
    if sgemm_packed.AVAILABLE:
        assert_same_outputs(g, pack_weights(out), {"x": rand(4, 6, seed=3)}, rtol=1e-4, atol=1e-5)


def test_pack_weights_trans_b_and_shared_weight() -> None:
    # a Gemm with transB is packed (transB folded); a weight also read by another
    # node (a tied embedding) stays with BLAS
    g = graph(
        [
            node("Gemm", ["x", "wt", "c"], ["y"], transB=1),
            node("MatMul", ["x", "ws"], ["z"]),
            node("Gather", ["ws", "idx"], ["e"], axis=0),
        ],
        [("x", [3, 6]), ("idx", [2])],
        ["y", "z", "e"],
        {"wt": rand(20, 6), "c": rand(20, seed=1), "ws": rand(6, 6, seed=2)},
    )
    f = fuse_matmul(g)
    out = pack_weights(f)
    if not sgemm_packed.AVAILABLE:
        assert out is f
        return
    fm = [n for n in out.nodes if n.op_type == "FusedMatMul"]
    assert fm[0].attrs["packed"] == 20 and fm[0].attrs["transB"] == 0
    assert "packed" not in fm[1].attrs
    feeds = {"x": rand(3, 6, seed=3), "idx": np.array([0, 5], np.int64)}
    assert_same_outputs(g, out, feeds, rtol=1e-4, atol=1e-5)


def test_pack_weights_switch_and_size(monkeypatch) -> None:
    f = fuse_matmul(
        graph([node("MatMul", ["x", "w"], ["y"])], [("x", [3, 6])], ["y"], {"w": rand(6, 4)})
    )
    monkeypatch.setenv("ONNXEXEC_PACK_WEIGHTS", "0")
    assert pack_weights(f) is f
    # by default: packed on AVX-512 hosts only, and only weights of _MIN_SIZE values
    monkeypatch.delenv("ONNXEXEC_PACK_WEIGHTS")
    packed = pack_weights(f)
    assert (packed is not f) == sgemm_packed.AVX512
    monkeypatch.setattr(pack_weights_pass, "_MIN_SIZE", 25)
    assert pack_weights(f) is f
