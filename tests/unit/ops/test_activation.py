"""Activations and Softmax/LogSoftmax/Hardmax (ops/activation.py, ops/softmax.py).

References are the spec formulas written out in float64 numpy.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.runtime.session import InferenceSession

X = np.array([-3.0, -1.0, -0.25, 0.0, 0.3, 1.0, 2.5], np.float32)
X64 = X.astype(np.float64)


def run(op_type: str, inputs: list, opset: int, **attrs) -> np.ndarray:
    names = [f"x{i}" for i in range(len(inputs))]
    infos = [
        helper.make_tensor_value_info(n, onnx_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs, strict=True)
    ]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph([node], "t", infos, [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return InferenceSession(model).run(None, dict(zip(names, inputs, strict=True)))[0]


def close(y: np.ndarray, ref: np.ndarray, rtol: float = 1e-6) -> None:
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=rtol, atol=1e-7)


def sigmoid(v: np.ndarray) -> np.ndarray:
    return np.array([1 / (1 + math.exp(-t)) for t in v])


# --- the rectifier family ----------------------------------------------------------------


def test_activation_relu_float_and_int():
    close(run("Relu", [X], 13), np.maximum(X64, 0))
    close(run("Relu", [X], 1, consumed_inputs=[0]), np.maximum(X64, 0))
    i = run("Relu", [np.array([-5, 0, 7], np.int8)], 14)
    assert i.dtype == np.int8
    np.testing.assert_array_equal(i, [0, 0, 7])


def test_activation_leaky_elu_selu_celu():
    close(run("LeakyRelu", [X], 16), np.where(X64 < 0, 0.01 * X64, X64))
    close(run("LeakyRelu", [X], 1, alpha=0.2), np.where(X64 < 0, 0.2 * X64, X64))
    close(run("Elu", [X], 22, alpha=0.5), np.where(X64 < 0, 0.5 * (np.exp(X64) - 1), X64))
    close(run("Elu", [X], 1), np.where(X64 < 0, np.exp(X64) - 1, X64))
    a6, g6 = 1.67326319217681884765625, 1.05070102214813232421875
    close(run("Selu", [X], 6), g6 * np.where(X64 <= 0, a6 * (np.exp(X64) - 1), X64))
    # Selu-1 has its own (rounder) defaults.
    close(run("Selu", [X], 1), 1.0507 * np.where(X64 <= 0, 1.6732 * (np.exp(X64) - 1), X64))
    close(
        run("Celu", [X], 12, alpha=2.0),
        np.maximum(0, X64) + np.minimum(0, 2.0 * (np.exp(X64 / 2.0) - 1)),
    )


def test_activation_prelu_broadcasting_by_version():
    x = np.arange(-6, 6, dtype=np.float32).reshape(1, 3, 2, 2)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    ref = np.where(x < 0, x * slope.reshape(1, 3, 1, 1), x)
    # PRelu-6: a 1-D slope of size C is per channel (axis 1).
    close(run("PRelu", [x, slope], 6), ref)
    close(run("PRelu", [x, slope], 1, consumed_inputs=[0]), ref)
    # PRelu-7+: numpy unidirectional broadcasting, so the channel slope needs (3, 1, 1).
    close(run("PRelu", [x, slope.reshape(3, 1, 1)], 16), ref)
    last = np.array([0.5, 0.25], np.float32)
    close(run("PRelu", [x, last], 9), np.where(x < 0, x * last, x))


def test_activation_thresholded_relu_and_shrink():
    close(run("ThresholdedRelu", [X], 10, alpha=0.5), np.where(X64 > 0.5, X64, 0))
    close(
        run("Shrink", [X], 9, lambd=0.5, bias=0.25),
        np.where(X64 < -0.5, X64 + 0.25, np.where(X64 > 0.5, X64 - 0.25, 0)),
    )
    i = run("Shrink", [np.array([-5, -1, 0, 1, 5], np.int32)], 9, lambd=1.5, bias=1.0)
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i, [-4, 0, 0, 0, 4])


# --- sigmoid family ------------------------------------------------------------------------


def test_activation_sigmoid_tanh_hard_sigmoid_stable():
    big = np.array([-1000.0, -20.0, 0.0, 20.0, 1000.0], np.float32)
    y = run("Sigmoid", [big], 13)
    np.testing.assert_allclose(y, [0.0, 1 / (1 + math.exp(20)), 0.5, 1 / (1 + math.exp(-20)), 1])
    assert not np.isnan(y).any()
    close(run("Sigmoid", [X], 1), sigmoid(X64))
    close(run("Tanh", [X], 6), np.tanh(X64))
    close(run("HardSigmoid", [X], 6), np.clip(0.2 * X64 + 0.5, 0, 1))
    close(run("HardSigmoid", [X], 1, alpha=0.5, beta=0.1), np.clip(0.5 * X64 + 0.1, 0, 1))
    close(run("HardSwish", [X], 14), X64 * np.clip(X64 / 6 + 0.5, 0, 1))


def test_activation_softplus_softsign_mish_large_values():
    v = np.array([-100.0, -1.0, 0.0, 1.0, 100.0], np.float32)
    v64 = v.astype(np.float64)
    close(run("Softplus", [v], 1), np.array([math.log1p(math.exp(t)) for t in v64]))
    close(run("Softsign", [v], 22), v64 / (1 + np.abs(v64)))
    sp = np.array([math.log1p(math.exp(t)) for t in v64])
    close(run("Mish", [v], 18), v64 * np.tanh(sp))


def test_activation_gelu_exact_and_tanh():
    erf = np.array([math.erf(t / math.sqrt(2)) for t in X64])
    close(run("Gelu", [X], 20), 0.5 * X64 * (1 + erf))
    inner = math.sqrt(2 / math.pi) * (X64 + 0.044715 * X64**3)
    close(run("Gelu", [X], 20, approximate="tanh"), 0.5 * X64 * (1 + np.tanh(inner)))


def test_activation_swish_and_swiglu():
    close(run("Swish", [X], 24, alpha=1.5), X64 * sigmoid(1.5 * X64))
    b = np.linspace(-1, 1, X.size).astype(np.float32)
    close(run("SwiGLU", [X, b], 28, alpha=2.0), X64 * sigmoid(2.0 * X64) * b)
    # refused at session creation by onnx's shape inference (the run-time check says
    # "one shape" for shapes only known then)
    with pytest.raises(Exception, match=r"one shape|SwiGLU node.*Inferred=3 Declared=7"):
        run("SwiGLU", [X, b[:3]], 28)


def test_activation_half_precision_dtypes_kept():
    h = X.astype(np.float16)
    for name, opset in [("Sigmoid", 13), ("Gelu", 20), ("Elu", 22), ("Softmax", 13)]:
        assert run(name, [h], opset).dtype == np.float16, name
    y = run("Tanh", [X.astype(ml_dtypes.bfloat16)], 13)
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(y.astype(np.float32), np.tanh(X64), rtol=2**-7, atol=1e-7)


# --- Softmax / LogSoftmax / Hardmax ------------------------------------------------------------


def softmax_rows(m: np.ndarray) -> np.ndarray:
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


XS = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)


def test_softmax_v13_along_one_axis():
    x64 = XS.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    close(run("Softmax", [XS], 13, axis=1), e / e.sum(axis=1, keepdims=True))
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    close(run("Softmax", [XS], 13), e / e.sum(axis=-1, keepdims=True))  # default axis=-1


@pytest.mark.parametrize("opset", [1, 11])
def test_softmax_before_13_coerces_to_2d(opset):
    # Softmax-1/11: input coerced to (2, 12) at axis=1 -> normalised over 3 * 4 values.
    x64 = XS.astype(np.float64)
    ref = softmax_rows(x64.reshape(2, 12)).reshape(2, 3, 4)
    close(run("Softmax", [XS], opset), ref)  # default axis=1
    ref0 = softmax_rows(x64.reshape(1, 24)).reshape(2, 3, 4)
    close(run("Softmax", [XS], opset, axis=0), ref0)
    log_ref = np.log(softmax_rows(x64.reshape(6, 4))).reshape(2, 3, 4)
    close(run("LogSoftmax", [XS], opset, axis=2), log_ref, rtol=1e-5)
    if opset == 11:  # negative axes from opset 11
        close(run("Softmax", [XS], opset, axis=-2), ref)


def test_logsoftmax_v13_stable():
    x = np.array([[1000.0, 0.0, -1000.0]], np.float32)
    y = run("LogSoftmax", [x], 13)
    np.testing.assert_allclose(y, [[0.0, -1000.0, -2000.0]], rtol=1e-6)


def test_hardmax_first_max_and_old_opset():
    x = np.array([[[1, 3, 3, 0], [5, 1, 5, 2]], [[0, 0, 0, 0], [2, 9, 1, 9]]], np.float32)
    y = run("Hardmax", [x], 13)
    np.testing.assert_array_equal(y, [[[0, 1, 0, 0], [1, 0, 0, 0]], [[1, 0, 0, 0], [0, 1, 0, 0]]])
    # Hardmax-11 coerces to (2, 8) at axis=1: one 1 per batch, at the first maximum.
    y11 = run("Hardmax", [x], 11)
    ref = np.zeros((2, 8), np.float32)
    ref[0, 4] = 1  # 5 at flat index 4 of batch 0
    ref[1, 5] = 1  # first 9 of batch 1
    np.testing.assert_array_equal(y11, ref.reshape(x.shape))
