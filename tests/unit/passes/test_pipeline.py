from __future__ import annotations

import numpy as np
import onnx
import pytest

import onnxexec
from onnxexec.ir.export import to_model
from onnxexec.passes import optimize
from tests.unit.passes._graphs import graph, node, ops, rand, run


def _mlp() -> object:
    return graph(
        [
            node("Identity", ["x"], ["xi"]),
            node("MatMul", ["xi", "w1"], ["h"]),
            node("Add", ["h", "b1"], ["a"]),
            node("Relu", ["a"], ["r"]),
            node("Shape", ["r"], ["s"]),
            node("Reshape", ["r", "s"], ["rr"]),
            node("MatMul", ["rr", "w2"], ["y"]),
        ],
        [("x", ["n", 4])],
        ["y"],
        {"w1": rand(4, 8), "b1": rand(8, seed=1), "w2": rand(8, 3)},
    )


@pytest.mark.parametrize("level", [0, 1, 2, 99])
def test_levels_preserve_outputs(level: int) -> None:
    g = _mlp()
    out = optimize(g, level)
    if level == 0:
        assert out is g
    elif level == 1:
        assert "Identity" not in ops(out) and all(n.domain == "" for n in out.nodes)
    else:
        assert ops(out) == ["FusedMatMul", "Reshape", "FusedMatMul"] or ops(out) == [
            "FusedMatMul",
            "FusedMatMul",
        ]
    x = rand(5, 4, seed=7)
    np.testing.assert_allclose(run(out, {"x": x})[0], run(g, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_session_level_and_optimized_model_round_trip(tmp_path) -> None:
    model = to_model(_mlp())
    path = tmp_path / "opt.onnx"
    so = onnxexec.SessionOptions(optimized_model_filepath=str(path))
    s = onnxexec.InferenceSession(model.SerializeToString(), so)
    assert any(n.domain == "onnxexec" for n in s.optimized_graph.nodes)
    assert len(s.graph.nodes) == 7  # the unoptimized graph stays available
    saved = onnx.load(str(path))
    assert {o.domain: o.version for o in saved.opset_import}.get("onnxexec") == 1
    x = rand(3, 4, seed=3)
    again = onnxexec.InferenceSession(str(path))
    base = onnxexec.InferenceSession(
        model.SerializeToString(),
        onnxexec.SessionOptions(
            graph_optimization_level=onnxexec.GraphOptimizationLevel.ORT_DISABLE_ALL
        ),
    )
    np.testing.assert_allclose(
        again.run(None, {"x": x})[0], base.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6
    )


def test_basic_level_export_runs_in_onnxruntime(tmp_path) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = to_model(_mlp())
    path = tmp_path / "basic.onnx"
    so = onnxexec.SessionOptions(
        optimized_model_filepath=str(path),
        graph_optimization_level=onnxexec.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    )
    ours = onnxexec.InferenceSession(model.SerializeToString(), so)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = rand(2, 4, seed=5)
    np.testing.assert_allclose(
        ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6
    )


def test_export_attribute_types_round_trip() -> None:
    from onnxexec.loaders.onnx_proto import load_onnx

    g = graph(
        [node("Transpose", ["x"], ["t"], perm=[1, 0]), node("LeakyRelu", ["t"], ["y"], alpha=0.2)],
        [("x", [2, 3])],
        ["y"],
    )
    m = to_model(g)
    types = [a.type for n in m.graph.node for a in n.attribute]
    assert types == [onnx.AttributeProto.INTS, onnx.AttributeProto.FLOAT]
    back = load_onnx(m)
    assert back.nodes[0].attrs["perm"] == (1, 0)
    assert back.nodes[1].attrs["alpha"] == pytest.approx(0.2)
