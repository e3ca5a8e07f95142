"""If/Loop bodies: optimized, planned and compiled once at session creation, run
against onnxruntime as the oracle at every optimization level."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxexec
from onnxexec.errors import NodeExecutionError
from onnxexec.runtime import plan as plan_mod
from onnxexec.runtime import schedule

ort = pytest.importorskip("onnxruntime")


def _f(name: str, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [3] if shape is None else shape)


def _if_model() -> onnx.ModelProto:
    """y = If(sum(x) > 0) then ((x + (1 + 2)) * w, Identity-wrapped) else Relu(x - 1).

    The then-branch holds foldable constants and a no-op Identity, and reads x and the
    initializer w from the outer scope."""
    c1 = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "c1")
    then_nodes = [
        helper.make_node("Constant", [], ["k"], value=c1),
        helper.make_node("Add", ["k", "k"], ["k2"]),  # foldable: both constant
        helper.make_node("Add", ["x", "k2"], ["t0"]),
        helper.make_node("Identity", ["t0"], ["t1"]),  # a no-op the optimizer drops
        helper.make_node("Mul", ["t1", "w"], ["ty"]),
    ]
    then_g = helper.make_graph(then_nodes, "then", [], [_f("ty")])
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    else_nodes = [
        helper.make_node("Sub", ["x", "one"], ["e0"]),
        helper.make_node("Relu", ["e0"], ["ey"]),
    ]
    else_g = helper.make_graph(else_nodes, "else", [], [_f("ey")], [one])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    inits = [
        numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    g = helper.make_graph(nodes, "if_model", [_f("x")], [_f("y")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _loop_model() -> onnx.ModelProto:
    """acc_{i+1} = Relu(acc_i * 0.5 + x) + Identity(i as float), 4 iterations, plus the
    stacked per-iteration values."""
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    body_nodes = [
        helper.make_node("Mul", ["a_in", "half"], ["b0"]),
        helper.make_node("Add", ["b0", "x"], ["b1"]),  # x: outer scope
        helper.make_node("Relu", ["b1"], ["b2"]),
        helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        helper.make_node("Identity", ["fi"], ["fi2"]),
        helper.make_node("Add", ["b2", "fi2"], ["a_out"]),
        helper.make_node("Identity", ["a_out"], ["scan_out"]),
        helper.make_node("Identity", ["c_in"], ["c_out"]),
    ]
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            _f("a_in"),
        ],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), _f("a_out"), _f("scan_out")],
        [half],
    )
    inits = [
        numpy_helper.from_array(np.array(4, np.int64), "trip"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.zeros(3, np.float32), "a0"),
    ]
    node = helper.make_node("Loop", ["trip", "cond", "a0"], ["a", "stack"], body=body)
    g = helper.make_graph([node], "loop_model", [_f("x")], [_f("a"), _f("stack", [4, 3])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


FEEDS = [np.array([1.0, -2.0, 0.5], np.float32), np.array([-1.0, -2.0, 0.5], np.float32)]


@pytest.mark.parametrize("build", [_if_model, _loop_model], ids=["if", "loop"])
@pytest.mark.parametrize("level", [0, 1, 2, 99])
def test_bodies_match_onnxruntime(build, level: int) -> None:
    model = build().SerializeToString()
    sess = onnxexec.InferenceSession(model, onnxexec.SessionOptions(graph_optimization_level=level))
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for x in FEEDS:
        got = sess.run(None, {"x": x})
        want = ref.run(None, {"x": x})
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _body_ops(sess: onnxexec.InferenceSession) -> dict[str, list[str]]:
    step = next(s for s in sess._plan.steps if s.subplans)
    return {p.graph.name: [s.node.op_type for s in p.steps] for p in step.subplans.values()}


def test_bodies_optimized_at_the_session_level() -> None:
    model = _if_model().SerializeToString()
    plain = _body_ops(
        onnxexec.InferenceSession(model, onnxexec.SessionOptions(graph_optimization_level=0))
    )
    basic = _body_ops(
        onnxexec.InferenceSession(model, onnxexec.SessionOptions(graph_optimization_level=1))
    )
    assert plain["then"] == ["Constant", "Add", "Add", "Identity", "Mul"]
    # the constant Add folded away, the Identity dropped; the outer reads stay
    assert basic["then"] == ["Add", "Mul"]
    loop = _body_ops(
        onnxexec.InferenceSession(
            _loop_model().SerializeToString(),
            onnxexec.SessionOptions(graph_optimization_level=1),
        )
    )
    # the inner Identity (fi -> fi2) is gone; copies onto graph outputs may remain
    assert loop["body"][:5] == ["Mul", "Add", "Relu", "Cast", "Add"]
    assert len(loop["body"]) < 8


def test_bodies_planned_and_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    plans: list[str] = []
    bodies: list[str] = []
    real_plan, real_body = plan_mod._Planner.plan, schedule._body

    def counting_plan(self, g, outer=()):
        plans.append(g.name)
        return real_plan(self, g, outer)

    def counting_body(step, sub):
        bodies.append(sub.graph.name)
        return real_body(step, sub)

    monkeypatch.setattr(plan_mod._Planner, "plan", counting_plan)
    monkeypatch.setattr(schedule, "_body", counting_body)
    for build in (_if_model, _loop_model):
        sess = onnxexec.InferenceSession(build().SerializeToString())
        sess.run(None, {"x": FEEDS[0]})
        planned, compiled = len(plans), len(bodies)
        for k in range(10):
            sess.run(None, {"x": FEEDS[k % 2]})
        assert len(plans) == planned and len(bodies) == compiled
    assert plans.count("then") == plans.count("else") == plans.count("body") == 1
    assert sorted(bodies) == ["body", "else", "then"]


def test_body_error_names_the_inner_node() -> None:
    model = _loop_model()
    body = model.graph.node[0].attribute[0].g
    body.node[1].name = "inner_add"
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    sess = onnxexec.InferenceSession(
        model.SerializeToString(), onnxexec.SessionOptions(graph_optimization_level=1)
    )
    with pytest.raises(NodeExecutionError, match="inner_add"):
        sess.run(None, {"x": np.zeros(5, np.float32)})  # [3] + [5] does not broadcast


def test_debug_logging_reaches_body_nodes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = _loop_model()
    model.graph.node[0].attribute[0].g.node[2].name = "inner_relu"
    sess = onnxexec.InferenceSession(
        model.SerializeToString(), onnxexec.SessionOptions(graph_optimization_level=1)
    )
    monkeypatch.setenv("ONNXEXEC_DEBUG", "1")
    with caplog.at_level(logging.DEBUG, logger="onnxexec"):
        sess.run(None, {"x": FEEDS[0]})
    assert sum("inner_relu" in r.getMessage() for r in caplog.records) == 4


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op_type", ["LSTM", "GRU"])
def test_recurrent_and_if_types_match_onnx_inference(op_type: str, layout: int) -> None:
    """The shape rules that type outer values for the bodies, against onnx's inference."""
    from onnxexec.loaders.onnx_proto import load_onnx
    from onnxexec.passes.shape_inference import infer_shapes

    gates = 4 if op_type == "LSTM" else 3
    # the branches read x from the outer scope: rename it to a [3] value here
    branches = [
        helper.make_graph([helper.make_node("Identity", ["x3"], [f"{k}y"])], k, [], [_f(f"{k}y")])
        for k in ("then", "else")
    ]
    x_shape = [5, 2, 7] if layout == 0 else [2, 5, 7]
    outs = ["y", "y_h", "y_c"] if op_type == "LSTM" else ["y", "y_h"]
    nodes = [
        helper.make_node(
            op_type, ["x", "W", "R"], outs, hidden_size=3, layout=layout, direction="bidirectional"
        ),
        helper.make_node("If", ["cond"], ["z"], then_branch=branches[0], else_branch=branches[1]),
    ]
    inits = [
        numpy_helper.from_array(np.zeros((2, gates * 3, 7), np.float32), "W"),
        numpy_helper.from_array(np.zeros((2, gates * 3, 3), np.float32), "R"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.zeros(3, np.float32), "x3"),
    ]
    g = helper.make_graph(nodes, "g", [_f("x", x_shape)], [_f("z")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    want = {
        v.name: v.type.tensor_type for v in onnx.shape_inference.infer_shapes(m).graph.value_info
    }
    facts = infer_shapes(load_onnx(m.SerializeToString()))
    for name in outs:
        dims = tuple(d.dim_value for d in want[name].shape.dim)
        assert facts[name].elem == want[name].elem_type and facts[name].shape == dims, name
    assert facts["z"].elem == TensorProto.FLOAT


def test_one_errstate_per_run_keeps_arithmetic_silent() -> None:
    """Handlers skip their own errstate inside a run (elementwise.FP_QUIET); overflow
    and 0/0 still give inf/nan without a RuntimeWarning, in a body too, and a handler
    called outside a run still suppresses them itself."""
    import warnings

    from onnxexec.ops.registry import resolve

    model = _if_model()
    model.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.array([1e38, 0.0, 2.0], np.float32), "w")
    )
    data = model.SerializeToString()
    x = np.array([1e38, 0.0, 3.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = onnxexec.InferenceSession(data).run(None, {"x": x})[0]
        mul = resolve("", "Mul", 17)
        assert mul is not None and np.isinf(mul.fn(x, x)[0])
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert np.isinf(got[0])
