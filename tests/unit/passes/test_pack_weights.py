"""Pass pack_weights packing a weight over its own bytes (WeightOwnership): the packed
panels against sgemm_packed.pack's copy, which weights qualify, that a caller who does
not own the graph never sees it change, and a session from a file end to end (numpy
float64 products as the reference)."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import onnxexec
from onnxexec.kernels.linalg import sgemm_packed
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.passes import pack_weights as pack_weights_pass
from onnxexec.passes.fuse_matmul import fuse_matmul
from onnxexec.passes.pack_weights import WeightOwnership, owned_weights, pack_weights
from tests.unit.passes._graphs import graph, node, rand, run

pytestmark = pytest.mark.skipif(not sgemm_packed.AVAILABLE, reason="no AVX2/FMA")


@pytest.fixture(autouse=True)
def _packing_on(monkeypatch):
    monkeypatch.setenv("ONNXEXEC_PACK_WEIGHTS", "1")
    monkeypatch.setattr(pack_weights_pass, "_MIN_SIZE", 0)


@pytest.mark.parametrize("nr", sgemm_packed.WIDTHS)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("pooled", [False, True])
def test_pack_in_place_is_pack(nr, transposed, pooled) -> None:
    k, n = (300, 4 * nr) if pooled else (7, 2 * nr)  # pooled: big enough to split
    w = rand(k, n, seed=nr)
    src = np.ascontiguousarray(w.T) if transposed else w.copy()
    dst = src.reshape(-1)  # the weight's own bytes
    scratch = np.empty(src.size + 3, np.float32)
    with ThreadPoolExecutor(2) as ex:
        out = sgemm_packed.pack_in_place(dst, src, transposed, scratch, nr, ex if pooled else None)
    assert out.shape == (n // nr, k, nr) and np.shares_memory(out, src)
    np.testing.assert_array_equal(out, sgemm_packed.pack(w, nr))
    with pytest.raises(ValueError, match="multiple"):
        bad = rand(5, nr + 1)
        sgemm_packed.pack_in_place(bad.reshape(-1), bad, False, scratch, nr)


def _owned(g):
    """`g` with each initializer in a buffer of its own, as the file loader gives."""
    return dataclasses.replace(g, initializers={k: v.copy() for k, v in g.initializers.items()})


def _model():
    nr = sgemm_packed.NR
    pair = rand(2, 6, 2 * nr, seed=4)  # two weights viewing one buffer
    g = _owned(
        graph(
            [
                node("MatMul", ["x", "w"], ["y"]),  # (6, 2nr): in place
                node("Gemm", ["x", "wt"], ["z"], transB=1),  # stored (nr, 6): in place
                node("MatMul", ["x", "wodd"], ["u"]),  # N not a multiple of nr: a copy
                node("MatMul", ["x", "p0"], ["v0"]),
                node("MatMul", ["x", "p1"], ["v1"]),
            ],
            [("x", [3, 6])],
            ["y", "z", "u", "v0", "v1"],
            {"w": rand(6, 2 * nr), "wt": rand(nr, 6, seed=1), "wodd": rand(6, nr + 3, seed=2)},
        )
    )
    inits = dict(g.initializers, p0=pair[0], p1=pair[1])
    return dataclasses.replace(g, initializers=inits)


def _reference(g, x):
    w = {k: v.astype(np.float64) for k, v in g.initializers.items()}
    x = x.astype(np.float64)
    return [x @ w["w"], x @ w["wt"].T, x @ w["wodd"], x @ w["p0"], x @ w["p1"]]


def test_owned_weights_packed_over_their_bytes() -> None:
    g = _model()
    x = rand(3, 6, seed=9)
    want = _reference(g, x)
    originals = dict(g.initializers)
    owner = WeightOwnership()
    with owned_weights(owner):
        out = pack_weights(fuse_matmul(g))
    assert owner.consumed == 2  # w and wt; wodd's panels need padding, p0/p1 share
    packed = {n.inputs[1]: out.initializers[n.inputs[1]] for n in out.nodes}
    assert all(n.attrs.get("packed") for n in out.nodes)
    shared = {
        name.split("__")[0]: np.shares_memory(a, originals[name.split("__")[0]])
        for name, a in packed.items()
    }
    assert shared == {"w": True, "wt": True, "wodd": False, "p0": False, "p1": False}
    for got, ref in zip(run(out, {"x": x}), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_weights_not_owned_are_never_written() -> None:
    g = _model()
    before = {k: v.copy() for k, v in g.initializers.items()}
    out = pack_weights(fuse_matmul(g))  # no owner: every weight packed as a copy
    assert all(n.attrs.get("packed") for n in out.nodes)
    for k, v in g.initializers.items():
        np.testing.assert_array_equal(v, before[k])
        assert not any(np.shares_memory(v, a) for a in out.initializers.values())


def _file_model(tmp_path, k: int = 256, n: int = 256):
    w = rand(k, n, seed=3)
    gr = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["y"])],
        "t",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, k])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")],
    )
    m = onnx.helper.make_model(gr, opset_imports=[onnx.helper.make_opsetid("", 17)])
    path = tmp_path / "mm.onnx"
    onnx.save(m, str(path))
    return path, m, w


def test_session_from_file_packs_in_place_and_reloads_graph(tmp_path) -> None:
    path, _, w = _file_model(tmp_path)
    loaded = load_onnx(path)
    assert loaded.initializers["w"].ctypes.data % 64 == 0  # big weights cache-aligned
    sess = onnxexec.InferenceSession(str(path))
    (node_,) = sess.optimized_graph.nodes
    assert node_.attrs.get("packed") == 256
    x = rand(2, 256, seed=5)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    # the loaded graph was spent by the in-place packing: `graph` re-reads the file
    np.testing.assert_array_equal(sess.graph.initializers["w"], w)


def test_session_from_model_proto_leaves_it_intact(tmp_path) -> None:
    _, m, w = _file_model(tmp_path)
    sess = onnxexec.InferenceSession(m)
    x = rand(2, 256, seed=6)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(numpy_helper.to_array(m.graph.initializer[0]), w)
    np.testing.assert_array_equal(sess.graph.initializers["w"], w)


def test_failure_after_overwriting_is_not_skipped(monkeypatch) -> None:
    # the pipeline skips a pass that raises and goes on with its input graph; once
    # weights were overwritten that graph is scrambled, so the error must surface
    from onnxexec.passes.pipeline import optimize

    def broken(*args, **kwargs):
        raise MemoryError("no room")

    def one_matmul():
        w = {"w": rand(6, 2 * sgemm_packed.NR)}
        return _owned(graph([node("MatMul", ["x", "w"], ["y"])], [("x", [3, 6])], ["y"], w))

    monkeypatch.setattr(sgemm_packed, "pack_in_place", broken)
    with pytest.raises(pack_weights_pass.WeightsSpentError, match="no room"):
        optimize(one_matmul(), 99, WeightOwnership())
    # without an owner nothing is overwritten and packing copies as before
    (n,) = optimize(one_matmul(), 99).nodes
    assert n.attrs.get("packed") == 2 * sgemm_packed.NR
