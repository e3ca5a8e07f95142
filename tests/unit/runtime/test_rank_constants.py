"""schedule._rank_constants: a binary fast call with a lower-rank constant operand
reads it padded to the other operand's rank. Results against onnxruntime (IEEE
arithmetic: bit for bit) on both operand sides, in an If branch, and a fed initializer
keeps its fed value."""

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


@pytest.mark.parametrize("cond", [True, False])
def test_padded_constants_match_onnxruntime_bit_for_bit(cond: bool) -> None:
    model = _model(fed_w=False)
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)}
    feeds["cond"] = np.array(cond)
    sess = onnxexec.InferenceSession(model, onnxexec.SessionOptions(graph_optimization_level=0))
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for _ in range(2):  # the padded views are kept per rank after the first run
        got = sess.run(None, feeds)
        for g_, r_ in zip(got, ref, strict=True):
            assert g_.shape == r_.shape == (2, 1, 64)
            np.testing.assert_array_equal(g_, r_)
    # the four binary steps at the top level read a constant: all four are wrapped
    wrapped = [e for e in schedule_of(sess._plan) if getattr(e[10], "__name__", "") == "call"]
    assert len(wrapped) == 4


def test_a_fed_initializer_is_not_bound() -> None:
    model = _model(fed_w=True)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 64)).astype(np.float32), "cond": np.array(True)}
    feeds["w"] = rng.standard_normal(64).astype(np.float32)
    sess = onnxexec.InferenceSession(model, onnxexec.SessionOptions(graph_optimization_level=0))
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g_, r_ in zip(sess.run(None, feeds), ref, strict=True):
        np.testing.assert_array_equal(g_, r_)
