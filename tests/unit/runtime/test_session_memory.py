"""A session must not keep weights the optimizer replaced (one copy of the model in
memory, not two), yet `graph` still gives the graph as loaded."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import onnx
from onnx import helper

import onnxexec.runtime.session as session_mod
from onnxexec import InferenceSession, SessionOptions
from onnxexec.runtime.options import GraphOptimizationLevel
from tests.unit.helpers import make_model, tensor_info


def _conv_bn(channels: int) -> onnx.ModelProto:
    """Conv followed by BatchNormalization: Conv+BN folding replaces the conv weight."""
    rng = np.random.default_rng(3)
    c = channels
    inits = {
        "w": rng.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.1,
        "scale": rng.uniform(0.5, 1.5, c).astype(np.float32),
        "bias": rng.standard_normal(c).astype(np.float32),
        "mean": rng.standard_normal(c).astype(np.float32),
        "var": rng.uniform(0.5, 1.5, c).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["h", "scale", "bias", "mean", "var"], ["y"]),
    ]
    return make_model(
        nodes, [tensor_info("x", shape=[1, c, 4, 4])], [tensor_info("y")], inits, opset=17
    )


def _session_watching_loads(monkeypatch, source):
    """The session and weak references to every initializer its loaded graph held."""
    refs: dict[str, weakref.ref] = {}
    real = session_mod.load_graph

    def spy(model):
        g = real(model)
        if not refs:
            refs.update({k: weakref.ref(v) for k, v in g.initializers.items()})
        loads.append(model)
        return g

    loads: list = []

    monkeypatch.setattr(session_mod, "load_graph", spy)
    return InferenceSession(source), refs, loads


def test_replaced_weights_are_freed_and_graph_is_reloaded(tmp_path, monkeypatch):
    m = _conv_bn(200)  # conv weight 200*200*9*4 bytes = 1.44 MB, over the 1 MiB bar
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    s, refs, loads = _session_watching_loads(monkeypatch, str(path))
    gc.collect()
    assert refs["w"]() is None  # folded into a new weight: the original is gone
    assert all(r() is None for r in refs.values())  # BN's vectors were folded in too
    x = np.random.default_rng(0).standard_normal((1, 200, 4, 4)).astype(np.float32)
    plain = InferenceSession(
        str(path), SessionOptions(graph_optimization_level=GraphOptimizationLevel.ORT_DISABLE_ALL)
    )
    np.testing.assert_allclose(
        s.run(None, {"x": x})[0], plain.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5
    )
    # Input descriptions need no reload; the graph as loaded comes back on demand.
    n_loads = len(loads)
    assert [v.name for v in s.graph_inputs] == [v.name for v in s.runtime_inputs] == ["x"]
    assert len(loads) == n_loads
    g = s.graph
    assert [n.op_type for n in g.nodes] == ["Conv", "BatchNormalization"]
    assert set(g.initializers) == set(refs)
    np.testing.assert_array_equal(
        g.initializers["w"], onnx.numpy_helper.to_array(m.graph.initializer[0])
    )
    assert s.graph is g and len(loads) == n_loads + 1


def test_small_models_and_graph_sources_keep_the_loaded_graph(monkeypatch):
    s, refs, _ = _session_watching_loads(monkeypatch, _conv_bn(8).SerializeToString())
    gc.collect()
    assert refs["w"]() is not None  # a few KB: kept, `graph` costs nothing
    g = session_mod.load_onnx(_conv_bn(200))
    s = InferenceSession(g)
    assert s.graph is g
