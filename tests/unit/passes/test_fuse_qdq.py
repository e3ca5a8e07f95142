"""fuse_qdq / fuse_dynamic_quant: QDQ groups and dynamic-quantization chains -> integer
ops, checked for structure, then against onnxruntime at its default optimization level
(which runs its own QDQ fusions)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.passes.fuse_dynamic_quant import fuse_dynamic_quant
from onnxexec.passes.fuse_qdq import fuse_qdq
from onnxexec.runtime.session import InferenceSession

RNG = np.random.default_rng(5)
F = TensorProto.FLOAT


def _model(nodes, inits, x_shape, extra_inputs=()):
    ins = [helper.make_tensor_value_info("x", F, list(x_shape)), *extra_inputs]
    g = helper.make_graph(
        nodes,
        "qdq",
        ins,
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _qdq_input(name="x"):
    """Q then DQ of the float input with (0.05, 128 uint8), as a QDQ model starts."""
    return [
        helper.make_node("QuantizeLinear", [name, "xs", "xz"], [f"{name}_q"]),
        helper.make_node("DequantizeLinear", [f"{name}_q", "xs", "xz"], [f"{name}_dq"]),
    ], {"xs": np.array(0.05, np.float32), "xz": np.array(128, np.uint8)}


def _out_qdq(src):
    return [
        helper.make_node("QuantizeLinear", [src, "ys", "yz"], ["y_q"]),
        helper.make_node("DequantizeLinear", ["y_q", "ys", "yz"], ["y"]),
    ], {"ys": np.array(0.08, np.float32), "yz": np.array(120, np.uint8)}


def _weight(shape, per_channel_axis=None):
    w = RNG.integers(-127, 128, shape).astype(np.int8)
    if per_channel_axis is None:
        return w, np.array(0.01, np.float32), np.array(0, np.int8)
    n = shape[per_channel_axis]
    return w, RNG.uniform(0.005, 0.02, n).astype(np.float32), np.zeros(n, np.int8)


def _ours_vs_ort(model, feeds, step):
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = ref.run(None, feeds)
    (got,) = InferenceSession(model).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.0001)


def _fused_ops(model):
    return [(n.domain, n.op_type) for n in fuse_qdq(load_onnx(model)).nodes]


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_with_bias_becomes_qlinearconv(per_channel):
    pre, inits = _qdq_input()
    w, ws, wz = _weight((6, 3, 3, 3), 0 if per_channel else None)
    bias_scale = (0.05 * ws).astype(np.float32)
    bias = RNG.integers(-300, 300, 6).astype(np.int32)
    post, out_inits = _out_qdq("c")
    nodes = [
        *pre,
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["w_dq"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["b_dq"], axis=0),
        helper.make_node("Conv", ["x_dq", "w_dq", "b_dq"], ["c"], pads=[1, 1, 1, 1]),
        *post,
    ]
    inits |= out_inits | {"w": w, "ws": ws, "wz": wz, "b": bias, "bs": bias_scale}
    inits["bz"] = np.zeros(bias_scale.shape, np.int32)
    model = _model(nodes, inits, (1, 3, 8, 8))
    got = _fused_ops(model)
    assert ("", "QLinearConv") in got and ("", "Conv") not in got
    # the Q/DQ at the model's edges stay
    assert got.count(("", "DequantizeLinear")) == 1 and got.count(("", "QuantizeLinear")) == 1
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32) * 3
    _ours_vs_ort(model, {"x": x}, 0.08)


@pytest.mark.parametrize("quantized_out", [True, False])
def test_matmul_becomes_qlinearmatmul_or_integer_to_float(quantized_out):
    pre, inits = _qdq_input()
    w, ws, wz = _weight((16, 10), 1)
    nodes = [*pre, helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["w_dq"], axis=1)]
    inits |= {"w": w, "ws": ws, "wz": wz}
    if quantized_out:
        post, out_inits = _out_qdq("m")
        nodes += [helper.make_node("MatMul", ["x_dq", "w_dq"], ["m"]), *post]
        inits |= out_inits
    else:
        nodes.append(helper.make_node("MatMul", ["x_dq", "w_dq"], ["y"]))
    model = _model(nodes, inits, (2, 5, 16))
    want_op = ("", "QLinearMatMul") if quantized_out else ("com.microsoft", "MatMulIntegerToFloat")
    got = _fused_ops(model)
    assert want_op in got and ("", "MatMul") not in got
    x = RNG.normal(size=(2, 5, 16)).astype(np.float32) * 3
    _ours_vs_ort(model, {"x": x}, 0.08 if quantized_out else 1e-5)


def test_gemm_with_bias_becomes_qgemm():
    pre, inits = _qdq_input()
    w, ws, wz = _weight((7, 16), 0)  # transB: (N, K), per output column = axis 0
    bias = RNG.integers(-300, 300, 7).astype(np.int32)
    post, out_inits = _out_qdq("g")
    nodes = [
        *pre,
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["w_dq"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["b_dq"], axis=0),
        helper.make_node("Gemm", ["x_dq", "w_dq", "b_dq"], ["g"], transB=1),
        *post,
    ]
    bs = (0.05 * ws).astype(np.float32)
    inits |= out_inits | {"w": w, "ws": ws, "wz": wz, "b": bias, "bs": bs}
    inits["bz"] = np.zeros(7, np.int32)
    model = _model(nodes, inits, (3, 16))
    assert ("com.microsoft", "QGemm") in _fused_ops(model)
    _ours_vs_ort(model, {"x": RNG.normal(size=(3, 16)).astype(np.float32) * 3}, 0.08)


@pytest.mark.parametrize(
    ("op_type", "attrs", "want"),
    [
        ("Sigmoid", {}, "QLinearSigmoid"),
        ("LeakyRelu", {"alpha": 0.2}, "QLinearLeakyRelu"),
        ("Softmax", {"axis": -1}, "QLinearSoftmax"),
        ("GlobalAveragePool", {}, "QLinearGlobalAveragePool"),
        ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, "QLinearAveragePool"),
        ("Add", {}, "QLinearAdd"),
        ("Mul", {}, "QLinearMul"),
        ("Concat", {"axis": 1}, "QLinearConcat"),
    ],
)
def test_elementwise_groups_become_qlinear_ops(op_type, attrs, want):
    pre, inits = _qdq_input()
    pre2, _ = _qdq_input("x2")
    binary = op_type in ("Add", "Mul", "Concat")
    ins = ["x_dq", "x2_dq"] if binary else ["x_dq"]
    post, out_inits = _out_qdq("e")
    nodes = [*pre, *(pre2 if binary else []), helper.make_node(op_type, ins, ["e"], **attrs)]
    nodes += post
    extra = [helper.make_tensor_value_info("x2", F, [1, 4, 6, 6])] if binary else []
    model = _model(nodes, inits | out_inits, (1, 4, 6, 6), extra)
    got = _fused_ops(model)
    assert ("com.microsoft", want) in got and ("", op_type) not in got
    feeds = {"x": RNG.normal(size=(1, 4, 6, 6)).astype(np.float32) * 3}
    if binary:
        feeds["x2"] = RNG.normal(size=(1, 4, 6, 6)).astype(np.float32) * 3
    _ours_vs_ort(model, feeds, 0.08)


def test_float_weight_and_float_conv_output_stay():
    pre, inits = _qdq_input()
    nodes = [
        *pre,
        # a float weight (no DQ) and a Conv whose output is not quantized: nothing to fuse
        helper.make_node("Conv", ["x_dq", "wf"], ["c"]),
        helper.make_node("MatMul", ["c", "m"], ["y"]),
    ]
    inits |= {"wf": RNG.normal(size=(2, 3, 1, 1)).astype(np.float32)}
    inits["m"] = RNG.normal(size=(4, 4)).astype(np.float32)
    model = _model(nodes, inits, (1, 3, 4, 4))
    g = load_onnx(model)
    assert fuse_qdq(g) is g


@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quant_chain_becomes_matmul_integer_to_float(per_column):
    # what quantize_dynamic emits per MatMul: DynamicQuantizeLinear -> MatMulInteger ->
    # Cast -> Mul(Mul(a_scale, W_scale)) -> Add(bias)
    w, ws, _ = _weight((48, 12), 1 if per_column else None)
    wz = np.zeros(ws.shape, np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["s"]),
        helper.make_node("Mul", ["accf", "s"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    inits = {"w": w, "ws": ws, "wz": wz, "b": RNG.normal(size=12).astype(np.float32)}
    model = _model(nodes, inits, (2, 5, 48))
    got = [(n.domain, n.op_type) for n in fuse_dynamic_quant(load_onnx(model)).nodes]
    assert got == [("", "DynamicQuantizeLinear"), ("com.microsoft", "MatMulIntegerToFloat")]
    x = RNG.normal(size=(2, 5, 48)).astype(np.float32)
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = ref.run(None, {"x": x})
    (ours,) = InferenceSession(model).run(None, {"x": x})
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)
