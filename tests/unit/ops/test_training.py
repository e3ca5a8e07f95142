"""ai.onnx.preview.training optimizers, against the spec's pseudo code written out."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import node_model

DOMAIN = "ai.onnx.preview.training"
rng = np.random.default_rng(11)


def run(op, inputs, n_out, **attrs):
    model, feeds = node_model(op, inputs, n_out, 1, domain=DOMAIN, **attrs)
    return InferenceSession(model).run(None, feeds)


def vec(n=4):
    return rng.standard_normal(n).astype(np.float32)


R, T0, T3 = np.array(0.1, np.float32), np.array(0, np.int64), np.array(3, np.int64)


def test_adagrad_two_tensors():
    x1, x2, g1, g2 = vec(), vec(3), vec(), vec(3)
    h1, h2 = np.abs(vec()), np.abs(vec(3))
    outs = run(
        "Adagrad",
        [R, T3, x1, x2, g1, g2, h1, h2],
        4,
        decay_factor=0.5,
        epsilon=1e-5,
        norm_coefficient=0.01,
    )
    r = 0.1 / (1 + 3 * 0.5)
    for x, g, h, x_new, h_new in ((x1, g1, h1, outs[0], outs[2]), (x2, g2, h2, outs[1], outs[3])):
        gr = 0.01 * x + g
        hn = h + gr * gr
        np.testing.assert_allclose(h_new, hn, rtol=1e-6)
        np.testing.assert_allclose(x_new, x - r * gr / (np.sqrt(hn) + 1e-5), rtol=1e-5)
        assert x_new.dtype == np.float32


def test_momentum_standard_first_step_and_nesterov():
    x, g, v = vec(), vec(), vec()
    x_new, v_new = run(
        "Momentum", [R, T0, x, g, v], 2, alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.0
    )
    vn = 0.9 * v + 1.0 * g  # beta is 1 on the first step
    np.testing.assert_allclose(v_new, vn, rtol=1e-6)
    np.testing.assert_allclose(x_new, x - 0.1 * vn, rtol=1e-6)
    x_new, v_new = run(
        "Momentum", [R, T3, x, g, v], 2, alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.1
    )
    gr = 0.1 * x + g
    vn = 0.9 * v + 0.5 * gr
    np.testing.assert_allclose(v_new, vn, rtol=1e-6)
    np.testing.assert_allclose(x_new, x - 0.1 * (gr + 0.9 * vn), rtol=1e-6)


def test_adam_bias_correction():
    x, g, v, h = vec(), vec(), vec(), np.abs(vec())
    x_new, v_new, h_new = run(
        "Adam",
        [R, T3, x, g, v, h],
        3,
        alpha=0.8,
        beta=0.9,
        epsilon=1e-4,
        norm_coefficient=0.02,
        norm_coefficient_post=0.1,
    )
    gr = 0.02 * x + g
    vn = 0.8 * v + 0.2 * gr
    hn = 0.9 * h + 0.1 * gr * gr
    r = 0.1 * np.sqrt(1 - 0.9**3) / (1 - 0.8**3)
    np.testing.assert_allclose(v_new, vn, rtol=1e-5)
    np.testing.assert_allclose(h_new, hn, rtol=1e-5)
    np.testing.assert_allclose(
        x_new, 0.9 * (x - r * vn / (np.sqrt(hn) + 1e-4)), rtol=1e-5, atol=1e-6
    )


def _gradient_model(nodes, inputs, outputs, xs, y, zs=()):
    grad_outs = [f"d_{x}" for x in xs]
    attrs = {"xs": list(xs), "y": y}
    if zs:
        attrs["zs"] = list(zs)
    grad = helper.make_node("Gradient", [*xs, *zs], grad_outs, domain=DOMAIN, **attrs)
    f = TensorProto.FLOAT
    g = helper.make_graph(
        [*nodes, grad],
        "g",
        [helper.make_tensor_value_info(n, f, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, f, None) for n in [*outputs, *grad_outs]],
    )
    model = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 12), helper.make_opsetid(DOMAIN, 1)]
    )
    model.ir_version = 7
    return model


def test_gradient_of_add_and_mul():
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "a"], ["d"])]
    model = _gradient_model(nodes, [("a", [3]), ("b", [3])], ["d"], ["a", "b"], "d")
    a, b = vec(3), vec(3)
    d, da, db = InferenceSession(model).run(None, {"a": a, "b": b})
    np.testing.assert_allclose(d, (a + b) * a, rtol=1e-6)
    np.testing.assert_allclose(da, 2 * a + b, rtol=1e-6)  # d/da (a + b) a
    np.testing.assert_allclose(db, a, rtol=1e-6)


def test_gradient_through_matmul_tanh_reduce_with_constant_z():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("Mul", ["t", "z"], ["tz"]),
        helper.make_node("ReduceSum", ["tz"], ["loss"], keepdims=0),
    ]
    model = _gradient_model(
        nodes, [("x", [2, 3]), ("w", [3, 4]), ("z", [4])], ["loss"], ["x", "w"], "loss", ["z"]
    )
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    z = vec(4)
    _, dx, dw = InferenceSession(model).run(None, {"x": x, "w": w, "z": z})
    upstream = (1 - np.tanh(x @ w) ** 2) * z  # dL/dh
    np.testing.assert_allclose(dx, upstream @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dw, x.T @ upstream, rtol=1e-5, atol=1e-6)
