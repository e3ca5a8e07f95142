"""The compiled schedule's direct calls (runtime/fastpath.py), pre-placed Constant
nodes and inline If branches: results against onnxruntime, and bit for bit against
the handlers they stand in for."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxexec
from onnxexec.errors import NodeExecutionError
from onnxexec.ops.reduce import FAST_MIN
from onnxexec.runtime.schedule import schedule_of

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT
_BINARY = ["Add", "Sub", "Mul", "Div", "Equal", "Greater", "Less", "GreaterOrEqual"]
_BINARY += ["LessOrEqual"]
_UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Reciprocal", "Log"]
_UNARY += ["Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Atan"]
# NaN, infinities, signed zeros, sigmoid's subnormal range, values exp overflows on
_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, -100.0, -90.0, 90.0, 2.5, -1.5, 1e-30, 7.0]


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return m.SerializeToString()


def _sessions(model: bytes, level: int = 0) -> tuple:
    so = onnxexec.SessionOptions(graph_optimization_level=level)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return onnxexec.InferenceSession(model, so), ref


def _vi(name: str, shape: list, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _values(shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.standard_normal(shape) * 3, np.float32)
    flat = x.reshape(-1)
    n = min(flat.size, len(_SPECIAL))
    flat[:n] = np.asarray(_SPECIAL[:n], np.float32)
    return x


def _fast_entries(sess: onnxexec.InferenceSession) -> list:
    return [e for e in schedule_of(sess._plan) if e[-1] is not None]


@pytest.mark.parametrize("op_type", _BINARY)
@pytest.mark.parametrize(("sa", "sb"), [((2, 12), (2, 12)), ((2, 12), (12,)), ((), ())])
def test_binary_matches_onnxruntime_and_the_handler(op_type: str, sa: tuple, sb: tuple) -> None:
    out_elem = TensorProto.BOOL if op_type not in ("Add", "Sub", "Mul", "Div") else F
    model = _model(
        [helper.make_node(op_type, ["a", "b"], ["y"], name="n0")],
        [_vi("a", list(sa)), _vi("b", list(sb))],
        [_vi("y", None, out_elem)],  # type: ignore[arg-type]
    )
    ox, ref = _sessions(model)
    a, b = _values(sa, 1), _values(sb, 2)
    if sb:  # equal pairs for the comparisons
        bf = b.reshape(-1)
        bf[::3] = a.reshape(-1)[: b.size][::3]
    got = ox.run(None, {"a": a, "b": b})[0]
    want = ref.run(None, {"a": a, "b": b})[0]
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    (entry,) = _fast_entries(ox)  # the direct call was taken...
    assert np.asarray(entry[0](a, b)).tobytes() == got.tobytes()  # ...the handler's bits


@pytest.mark.parametrize("op_type", _UNARY)
@pytest.mark.parametrize("shape", [(3, 16), ()])
def test_unary_matches_onnxruntime_and_the_handler(op_type: str, shape: tuple) -> None:
    model = _model(
        [helper.make_node(op_type, ["x"], ["y"], name="n0")],
        [_vi("x", list(shape))],
        [_vi("y", None)],  # type: ignore[arg-type]
    )
    ox, ref = _sessions(model)
    x = _values(shape, 3) if shape else np.array(-90.0, np.float32)
    got = ox.run(None, {"x": x})[0]
    want = ref.run(None, {"x": x})[0]
    assert type(got) is np.ndarray and got.dtype == np.float32 and got.shape == shape
    # onnxruntime's vectorized transcendentals differ from libm in the last bits, and
    # its Sigmoid is an approximation (~1e-4 relative in the tails, subnormals
    # flushed): the exact value is checked against float64 below
    rtol, atol = (1e-4, 1e-7) if op_type == "Sigmoid" else (2e-6, 1e-37)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    (entry,) = _fast_entries(ox)
    want_bits = np.asarray(entry[0](x))
    assert got.tobytes() == want_bits.tobytes()  # bit for bit: NaN payloads, signed zeros


def test_sigmoid_float32_is_the_float64_value_rounded_once() -> None:
    """Oracle: numpy float64 (sigmoid's value is well conditioned there), so the
    subnormal tail below x = -88 keeps its digits and nothing overflows."""
    x = np.concatenate([np.linspace(-104, 30, 20001), _SPECIAL]).astype(np.float32)
    ox, _ = _sessions(
        _model([helper.make_node("Sigmoid", ["x"], ["y"])], [_vi("x", [None])], [_vi("y", None)])  # type: ignore[arg-type]
    )
    got = ox.run(None, {"x": x})[0]
    with np.errstate(over="ignore"):
        want = (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert got[np.searchsorted(x[:20001], -100.0)] > 0  # subnormal, not flushed to 0


def test_other_dtypes_take_the_handler() -> None:
    """float64 and int32 inputs fail the float32 check: the handler's result, exactly
    (integer Div truncates toward zero, numpy's // floors)."""
    for elem, dt in ((TensorProto.DOUBLE, np.float64), (TensorProto.INT32, np.int32)):
        model = _model(
            [helper.make_node("Div", ["a", "b"], ["y"])],
            [_vi("a", [6], elem), _vi("b", [6], elem)],
            [_vi("y", [6], elem)],
        )
        ox, ref = _sessions(model)
        a = np.array([-7, 7, -9, 9, 5, -5], dt)
        b = np.array([2, 2, 4, -4, 3, 3], dt)
        got = ox.run(None, {"a": a, "b": b})[0]
        assert got.dtype == dt
        np.testing.assert_array_equal(got, ref.run(None, {"a": a, "b": b})[0])


def test_a_failing_direct_call_names_the_node() -> None:
    model = _model(
        [
            helper.make_node("Relu", ["a"], ["r"], name="first"),
            helper.make_node("Add", ["r", "b"], ["y"], name="the_add"),
        ],
        [_vi("a", [None]), _vi("b", [None])],
        [_vi("y", None)],  # type: ignore[arg-type]
    )
    ox, _ = _sessions(model)  # level 0: unfused
    with pytest.raises(NodeExecutionError, match=r"'the_add' \(Add, opset 17\).*float32\[3\]"):
        ox.run(None, {"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op_type", ["ReduceMean", "ReduceSum"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (0, 4), (1, FAST_MIN)])
def test_reduce_all_axes(op_type: str, keepdims: int, shape: tuple) -> None:
    """All axes (no `axes`): the direct call below reduce.FAST_MIN elements, the
    handler's kernel from there on. The mean of nothing is NaN (0/0, numpy's mean of
    an empty array; onnxruntime gives 0), as the handler had it."""
    model = _model(
        [helper.make_node(op_type, ["x"], ["y"], keepdims=keepdims)],
        [_vi("x", list(shape))],
        [_vi("y", None)],  # type: ignore[arg-type]
    )
    ox, ref = _sessions(model)
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    got = ox.run(None, {"x": x})[0]
    want = ref.run(None, {"x": x})[0]
    if x.size == 0 and op_type == "ReduceMean":
        want = np.full(want.shape, np.nan, np.float32)
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (entry,) = _fast_entries(ox)
    np.testing.assert_array_equal(entry[0](x, **entry[5]), got)


def test_reduce_with_axes_keeps_the_handler() -> None:
    model = _model(
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1])],
        [_vi("x", [2, 3])],
        [_vi("y", [2, 1])],
    )
    ox, ref = _sessions(model)
    assert not _fast_entries(ox)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(ox.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])


def test_constant_nodes_are_pre_placed_and_outputs_stay_the_callers() -> None:
    """A Constant's value is placed once (no step left for it); the graph output that
    is that value is still a copy the caller may write to."""
    k = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "kv")
    model = _model(
        [
            helper.make_node("Constant", [], ["k"], value=k),
            helper.make_node("Mul", ["x", "k"], ["y"]),
        ],
        [_vi("x", [3])],
        [_vi("y", [3]), _vi("k", [3])],
    )
    ox, ref = _sessions(model)
    x = np.array([1.0, -1.0, 0.5], np.float32)
    _, kout = ox.run(None, {"x": x})
    assert [e[9].node.op_type for e in schedule_of(ox._plan)] == ["Mul"]
    kout[:] = 100.0  # the caller's array: the next run must not see it
    for got, want in zip(ox.run(None, {"x": x}), ref.run(None, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)


def _if_model(cond_shape: list) -> bytes:
    """y = If(c) then Sigmoid(x * k) with k a Constant in the branch, else x - 1."""
    k = numpy_helper.from_array(np.array([2.0, -1.0, 0.5], np.float32), "kv")
    then_g = helper.make_graph(
        [
            helper.make_node("Constant", [], ["k"], value=k),
            helper.make_node("Mul", ["x", "k"], ["t0"], name="then_mul"),
            helper.make_node("Sigmoid", ["t0"], ["ty"]),
        ],
        "then",
        [],
        [_vi("ty", [3])],
    )
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["ey"])], "else", [], [_vi("ey", [3])], [one]
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="gate")
    return _model(
        [node], [_vi("c", cond_shape, TensorProto.BOOL), _vi("x", [None])], [_vi("y", None)]
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("level", [0, 99])
@pytest.mark.parametrize("cond_shape", [[], [1]])
def test_if_branches_run_inline(level: int, cond_shape: list) -> None:
    ox, ref = _sessions(_if_model(cond_shape), level)
    x = np.array([0.5, -2.0, 3.0], np.float32)
    for c in (True, False, True):
        feed = {"c": np.full(cond_shape, c), "x": x}
        np.testing.assert_allclose(
            ox.run(None, feed)[0], ref.run(None, feed)[0], rtol=1e-6, atol=1e-7
        )


def test_an_error_in_an_inline_branch_names_the_if_and_the_inner_node() -> None:
    ox, _ = _sessions(_if_model([]))  # level 0: unfused
    with pytest.raises(NodeExecutionError, match=r"'gate' \(If.*'then_mul' \(Mul"):
        ox.run(None, {"c": np.array(True), "x": np.ones(4, np.float32)})
