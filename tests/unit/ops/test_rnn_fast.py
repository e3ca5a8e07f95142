"""ops/rnn_fast.py: LSTM / GRU with constant weights through a session (the prepare
hook) against the general driver (the handler without prepared state) bit for bit,
and against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxexec
from onnxexec.ops import rnn, rnn_fast

ort = pytest.importorskip("onnxruntime")

T, B, NI, H = 3, 2, 5, 4


def _case(op_type: str, opset: int, direction: str, layout: int, bias: bool, init: bool, **attrs):
    rng = np.random.default_rng(hash((op_type, opset, direction, layout, bias, init)) % 2**32)
    g = 4 if op_type == "LSTM" else 3
    d = 2 if direction == "bidirectional" else 1
    w = (rng.standard_normal((d, g * H, NI)) * 0.5).astype(np.float32)
    r = (rng.standard_normal((d, g * H, H)) * 0.5).astype(np.float32)
    b = (rng.standard_normal((d, 2 * g * H)) * 0.5).astype(np.float32)
    x = rng.standard_normal((B, T, NI) if layout else (T, B, NI)).astype(np.float32)
    state = (B, d, H) if layout else (d, B, H)
    h0 = rng.standard_normal(state).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    if bias:
        inits.append(numpy_helper.from_array(b, "B"))
    ins = ["x", "W", "R", "B" if bias else "", ""] + (["h0"] if init else [])
    feeds = {"x": x} | ({"h0": h0} if init else {})
    outs = ["y", "yh"]
    if op_type == "LSTM":
        if init:
            ins.append("c0")
            feeds["c0"] = (h0 * 0.7).astype(np.float32)
        outs.append("yc")
    if layout:
        attrs["layout"] = 1
    node = helper.make_node(op_type, ins, outs, hidden_size=H, direction=direction, **attrs)
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in feeds]
    ovi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in outs]
    graph = helper.make_graph([node], "g", vi, ovi, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    args = [x, w, r, b if bias else None, None, feeds.get("h0")]
    if op_type == "LSTM":
        args.append(feeds.get("c0"))
    return model.SerializeToString(), feeds, args, attrs


_CASES = [
    (op_type, opset, direction, layout, bias, init)
    for op_type in ("LSTM", "GRU")
    for opset, layout in ((7, 0), (14, 0), (14, 1))
    for direction in ("forward", "reverse", "bidirectional")
    for bias, init in ((True, True), (False, False))
]


@pytest.mark.parametrize("op_type,opset,direction,layout,bias,init", _CASES)
def test_session_equals_driver_and_onnxruntime(
    op_type, opset, direction, layout, bias, init, monkeypatch
) -> None:
    extra = {"linear_before_reset": 1} if op_type == "GRU" and bias else {}
    model, feeds, args, attrs = _case(op_type, opset, direction, layout, bias, init, **extra)
    calls = []
    real = rnn_fast.run
    monkeypatch.setattr(rnn_fast, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = onnxexec.InferenceSession(model).run(None, feeds)
    assert calls, "the prepared loop was not taken"
    handler = rnn.lstm if op_type == "LSTM" else rnn.gru
    want = handler(*args, hidden_size=H, direction=direction, **attrs)  # the driver
    for g_, w_ in zip(got, want, strict=True):
        assert g_.dtype == np.float32 and g_.shape == w_.shape
        np.testing.assert_array_equal(g_, w_)
    if layout:  # onnxruntime's CPU RNNs reject layout 1; the driver above is tested on it
        return  # in test_rnn.py against the layout-0 form
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g_, r_ in zip(got, ref, strict=True):
        np.testing.assert_allclose(g_, r_, rtol=1e-5, atol=1e-5)


def test_fed_weights_take_the_driver(monkeypatch) -> None:
    """W as a graph input: no prepared state applies, results still match onnxruntime."""
    model, feeds, _args, _ = _case("LSTM", 14, "forward", 0, True, True)
    m = onnx.load_from_string(model)
    w = next(i for i in m.graph.initializer if i.name == "W")
    m.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, None))
    m.graph.initializer.remove(w)
    feeds = feeds | {"W": numpy_helper.to_array(w)}
    calls = []
    real = rnn_fast.run
    monkeypatch.setattr(rnn_fast, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = onnxexec.InferenceSession(m.SerializeToString()).run(None, feeds)
    assert not calls
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for g_, r_ in zip(got, ref.run(None, feeds), strict=True):
        np.testing.assert_allclose(g_, r_, rtol=1e-5, atol=1e-5)


def test_non_default_activation_is_not_prepared() -> None:
    attrs = {"activations": ("Sigmoid", "Relu", "Tanh"), "clip": None}
    assert rnn_fast.prepare("LSTM", (None, np.zeros((1, 16, 5), np.float32)) * 2, attrs) is None
    assert rnn_fast.prepare("LSTM", (None,) * 3, {}) is None
