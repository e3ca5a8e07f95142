"""Lower-rank constant operands read padded to the other operand's rank: at level 0
schedule._rank_constants (binary fast calls), at level 99 FusedElementwise's numpy
path (ops/fused_elementwise._padded). Results against onnxruntime (IEEE arithmetic:
bit for bit) on both operand sides, in an If branch, and a fed initializer keeps its
fed value."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxexec
from onnxexec.runtime.schedule import schedule_of

ort = pytest.importorskip("onnxruntime")
F = TensorProto.FLOAT


def _const(name: str, value: np.ndarray) -> object:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))


def _chain(prefix: str, src: str, dst: str, rng: np.random.Generator) -> list:
    """Add(x, c[64]), Sub(c[64], .), Mul(., w initializer[64]), Div(., c[2, 1, 64])."""
    c1, c2 = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    c3 = (rng.standard_normal((2, 1, 64)) + 3).astype(np.float32)
    return [
        _const(f"{prefix}c1", c1),
        _const(f"{prefix}c2", c2),
        _const(f"{prefix}c3", c3),
        helper.make_node("Add", [src, f"{prefix}c1"], [f"{prefix}a"]),
        helper.make_node("Sub", [f"{prefix}c2", f"{prefix}a"], [f"{prefix}s"]),
        helper.make_node("Mul", [f"{prefix}s", "w"], [f"{prefix}m"]),
        helper.make_node("Div", [f"{prefix}m", f"{prefix}c3"], [dst]),
    ]


def _model(fed_w: bool) -> bytes:
    rng = np.random.default_rng(0)
    out = helper.make_tensor_value_info
    then = helper.make_graph(_chain("t", "x", "bt", rng), "t", [], [out("bt", F, None)])
    els = helper.make_graph(_chain("e", "x", "be", rng), "e", [], [out("be", F, None)])
    nodes = [
        *_chain("", "x", "top", rng),
        helper.make_node("If", ["cond"], ["br"], then_branch=then, else_branch=els),
    ]
    w = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "w")
    ins = [out("x", F, [1, 64]), out("cond", TensorProto.BOOL, [])]
    if fed_w:
        ins.append(out("w", F, [64]))
    g = helper.make_graph(nodes, "g", ins, [out("top", F, None), out("br", F, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("level", [0, 99])
@pytest.mark.parametrize("cond", [True, False])
def test_padded_constants_match_onnxruntime_bit_for_bit(cond: bool, level: int) -> None:
    model = _model(fed_w=False)
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)}
    feeds["cond"] = np.array(cond)
    so = onnxexec.SessionOptions(graph_optimization_level=level)
    sess = onnxexec.InferenceSession(model, so)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for _ in range(2):  # the padded views are kept per rank after the first run
        got = sess.run(None, feeds)
        for g_, r_ in zip(got, ref, strict=True):
            assert g_.shape == r_.shape == (2, 1, 64)
            np.testing.assert_array_equal(g_, r_)
    sched = schedule_of(sess._plan)
    if level == 0:  # the four binary steps at the top level read a constant: the three
        # with a lower-rank constant stay wrapped, Div's ([2, 1, 64]) is the plain ufunc
        assert sum(getattr(e[10], "__name__", "") == "call" for e in sched) == 3
        assert any(e[10] is np.divide for e in sched)
    else:  # one fused chain; c1, c2 and w ([64]) padded to the output's rank 3
        (fused,) = [e for e in sched if e[9].node.op_type == "FusedElementwise"]
        assert len(fused[5]["prepared"][4][3]) == 3


@pytest.mark.parametrize("level", [0, 99])
def test_a_fed_initializer_is_not_bound(level: int) -> None:
    model = _model(fed_w=True)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 64)).astype(np.float32), "cond": np.array(True)}
    feeds["w"] = rng.standard_normal(64).astype(np.float32)
    so = onnxexec.SessionOptions(graph_optimization_level=level)
    sess = onnxexec.InferenceSession(model, so)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g_, r_ in zip(sess.run(None, feeds), ref, strict=True):
        np.testing.assert_array_equal(g_, r_)
