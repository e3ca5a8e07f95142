"""Regression tests for wrong results of the fused levels on valid models (issue 19):
each graph is run at every level and compared with an independent oracle."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxexec.ops.fused_linear import fused_matmul
from onnxexec.passes.shape_inference import infer_shapes
from tests.unit.passes._levels import LEVELS, fused_ops, model, run_levels, session

node = helper.make_node
rng = np.random.default_rng(19)


def _randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("bias_shape", [(1,), (), (1, 1), (1, 256), (256,)])
def test_matmul_add_small_bias_all_levels(bias_shape: tuple[int, ...]) -> None:
    # K = N >= 256 takes the packed kernel at level 99, which read a [1] bias as (N,)
    w, b = _randn(256, 256), _randn(*bias_shape)
    m = model(
        [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["y"])],
        [("x", [4, 256])],
        ["y"],
        {"w": w, "b": b},
    )
    x = _randn(4, 256)
    ref = x.astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)
    for lv, (y,) in run_levels(m, {"x": x}).items():
        assert y.shape == (4, 256), lv
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=f"level {lv}")
    assert fused_ops(m) == ["FusedMatMul"]
    g = session(m, 99).optimized_graph
    assert g.initializers[g.nodes[0].inputs[2]].shape == (256,)  # the kernel's contract


@pytest.mark.parametrize("c_shape", [(1,), (), (1, 256)])
def test_gemm_small_c_all_levels(c_shape: tuple[int, ...]) -> None:
    w, c = _randn(256, 256), _randn(*c_shape)
    m = model([node("Gemm", ["x", "w", "c"], ["y"], beta=0.5)], [("x", [3, 256])], ["y"])
    m.graph.initializer.extend(
        [
            helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.reshape(-1))
            for k, v in [("w", w), ("c", c)]
        ]
    )
    x = _randn(3, 256)
    ref = x.astype(np.float64) @ w + 0.5 * c.astype(np.float64)
    for lv, (y,) in run_levels(m, {"x": x}).items():
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=f"level {lv}")


def test_fused_matmul_handler_broadcasts_any_bias() -> None:
    # the handler's fast paths take only an exact (N,) bias; others broadcast with numpy
    a, w = _randn(2, 3, 8), _randn(8, 5)
    for b in (_randn(1), _randn(3, 1), _randn(2, 3, 5), _randn(4, 1, 1, 5)):
        ref = a.astype(np.float64) @ w + b
        np.testing.assert_allclose(fused_matmul(a, w, b), ref, rtol=1e-5, atol=1e-5)


def _bias_first_chain() -> tuple:
    """Add(bias (56,), x (1, T, 56)) -> Relu -> LayerNorm -> Shape -> Gather(1): the fused
    chain's first input is the bias, whose shape is not the result's."""
    m = model(
        [
            node("Add", ["b", "x"], ["u"]),
            node("Relu", ["u"], ["r"]),
            node("LayerNormalization", ["r", "sc"], ["ln"], axis=-1),
            node("Shape", ["ln"], ["s"]),
            node("Gather", ["s", "one"], ["t"], axis=0),
            node("Identity", ["ln"], ["y"]),
        ],
        [("x", [1, "seq", 56])],
        ["y", ("t", TensorProto.INT64)],
        {"b": _randn(56), "sc": _randn(56), "one": np.array(1, np.int64)},
    )
    return m, _randn(1, 23, 56)


def test_elementwise_chain_bias_first_keeps_broadcast_shape() -> None:
    m, x = _bias_first_chain()
    outs = run_levels(m, {"x": x})
    for lv in LEVELS:
        assert int(outs[lv][1]) == 23, lv  # was a constant [1]-shaped Shape: IndexError
        np.testing.assert_allclose(outs[lv][0], outs[0][0], rtol=1e-5, atol=1e-5)
    assert "FusedElementwise" in fused_ops(m, 2)


def test_fused_op_shape_rules_broadcast_every_input() -> None:
    m, _ = _bias_first_chain()
    g = session(m, 2).optimized_graph
    facts = infer_shapes(g)
    fused = next(n for n in g.nodes if n.op_type == "FusedElementwise")
    assert facts[fused.outputs[0]].shape == (1, "seq", 56)


def test_attention_mask_with_more_batches_stays_correct() -> None:
    # the mask broadcasts the scores (1, 2, 4, 4) to 3 batches: the kernel's output
    # would keep Q's batch of 1, so the pattern must stay unfused
    m = model(
        [
            node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            node("MatMul", ["q", "kt"], ["s"]),
            node("Add", ["s", "mask"], ["sm"]),
            node("Softmax", ["sm"], ["p"], axis=-1),
            node("MatMul", ["p", "v"], ["y"]),
        ],
        [("q", [1, 2, 4, 8]), ("k", [1, 2, 4, 8]), ("v", [1, 2, 4, 8]), ("mask", [3, 1, 4, 4])],
        ["y"],
    )
    feeds = {k: _randn(1, 2, 4, 8) for k in "qkv"}
    feeds["mask"] = _randn(3, 1, 4, 4)
    q, k, v, mk = (feeds[n].astype(np.float64) for n in ("q", "k", "v", "mask"))
    s = q @ k.swapaxes(-1, -2) + mk
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    for lv, (y,) in run_levels(m, feeds).items():
        assert y.shape == (3, 2, 4, 8), lv
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5, err_msg=f"level {lv}")
    assert "FusedAttention" not in fused_ops(m)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_fused_max_min_propagate_nan(op: str) -> None:
    # found by the differential harness: the fused chain's Max(c, NaN) returned c
    m = model(
        [node("Sqrt", ["x"], ["r"]), node(op, ["c", "r"], ["m"]), node("Neg", ["m"], ["y"])],
        [("x", [3, 4])],
        ["y"],
        {"c": _randn(3, 4)},
    )
    x = _randn(3, 4)  # negative entries: Sqrt gives NaN
    c = np.frombuffer(m.graph.initializer[0].raw_data, np.float32).reshape(3, 4)
    with np.errstate(invalid="ignore"):
        ref = -getattr(np, "maximum" if op == "Max" else "minimum")(c, np.sqrt(x))
    assert np.isnan(ref).any()
    for lv, (y,) in run_levels(m, {"x": x}).items():
        np.testing.assert_array_equal(y, ref, err_msg=f"level {lv}")
    assert "FusedElementwise" in fused_ops(m)
