"""RNN / GRU / LSTM against onnxruntime (layout 0) and numpy recurrences written out."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node, run_ort

T, BATCH, IN, H = 4, 3, 5, 3
rng = np.random.default_rng(7)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def weights(gates: int, dirs: int = 1):
    f = np.float32
    w = rng.standard_normal((dirs, gates * H, IN)).astype(f)
    r = rng.standard_normal((dirs, gates * H, H)).astype(f)
    b = rng.standard_normal((dirs, 2 * gates * H)).astype(f)
    return w, r, b


X = rng.standard_normal((T, BATCH, IN)).astype(np.float32)
LENS = np.array([4, 2, 3], np.int32)


def assert_all_close(got, ref):
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_peepholes_seq_lens_vs_ort(direction):
    d = 2 if direction == "bidirectional" else 1
    w, r, b = weights(4, d)
    h0 = rng.standard_normal((d, BATCH, H)).astype(np.float32)
    c0 = rng.standard_normal((d, BATCH, H)).astype(np.float32)
    p = rng.standard_normal((d, 3 * H)).astype(np.float32)
    args = [X, w, r, b, LENS, h0, c0, p]
    kw = {"hidden_size": H, "direction": direction}
    assert_all_close(run_node("LSTM", args, 3, 14, **kw), run_ort("LSTM", args, 3, 14, **kw))


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_bidirectional_clip_vs_ort(lbr):
    w, r, b = weights(3, 2)
    args = [X, w, r, b, LENS]
    kw = {"hidden_size": H, "direction": "bidirectional", "clip": 0.5, "linear_before_reset": lbr}
    assert_all_close(run_node("GRU", args, 2, 14, **kw), run_ort("GRU", args, 2, 14, **kw))


def test_rnn_activation_alpha_beta_vs_ort():
    w, r, b = weights(1, 2)
    kw = {
        "hidden_size": H,
        "direction": "bidirectional",
        "activations": ["LeakyRelu", "ScaledTanh"],
        "activation_alpha": [0.2, 0.7],
        "activation_beta": [1.5],
    }
    args = [X, w, r, b]
    assert_all_close(run_node("RNN", args, 2, 14, **kw), run_ort("RNN", args, 2, 14, **kw))


def test_gru_written_out_linear_before_reset():
    w, r, b = weights(3)
    wz, wr, wh = np.split(w[0], 3)
    rz, rr, rh = np.split(r[0], 3)
    wbz, wbr, wbh, rbz, rbr, rbh = np.split(b[0], 6)
    h = np.zeros((BATCH, H), np.float32)
    ys = []
    for x in X:
        z = sigmoid(x @ wz.T + h @ rz.T + wbz + rbz)
        rt = sigmoid(x @ wr.T + h @ rr.T + wbr + rbr)
        hh = np.tanh(x @ wh.T + rt * (h @ rh.T + rbh) + wbh)
        h = (1 - z) * hh + z * h
        ys.append(h)
    y, y_h = run_node("GRU", [X, w, r, b], 2, 14, hidden_size=H, linear_before_reset=1)
    np.testing.assert_allclose(y[:, 0], np.stack(ys), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y_h[0], h, rtol=1e-5, atol=1e-6)


def test_lstm_input_forget_written_out():
    w, r, b = weights(4)
    bias = b[0, : 4 * H] + b[0, 4 * H :]
    h = np.zeros((BATCH, H), np.float32)
    c = np.zeros((BATCH, H), np.float32)
    for x in X:
        gi, go, _gf, gc = np.split(x @ w[0].T + h @ r[0].T + bias, 4, axis=1)
        i = sigmoid(gi)
        c = (1 - i) * c + i * np.tanh(gc)  # input_forget: f = 1 - i
        h = sigmoid(go) * np.tanh(c)
    _, y_h, y_c = run_node("LSTM", [X, w, r, b], 3, 14, hidden_size=H, input_forget=1)
    np.testing.assert_allclose(y_h[0], h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y_c[0], c, rtol=1e-5, atol=1e-6)


def test_layout_1_is_batch_major_layout_0():
    w, r, b = weights(4, 2)
    h0 = rng.standard_normal((2, BATCH, H)).astype(np.float32)
    kw = {"hidden_size": H, "direction": "bidirectional"}
    ref = run_ort("LSTM", [X, w, r, b, LENS, h0], 3, 14, **kw)
    xb, h0b = X.transpose(1, 0, 2), h0.transpose(1, 0, 2)
    y, y_h, y_c = run_node("LSTM", [xb, w, r, b, LENS, h0b], 3, 14, layout=1, **kw)
    np.testing.assert_allclose(y, ref[0].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y_h, ref[1].transpose(1, 0, 2), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y_c, ref[2].transpose(1, 0, 2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("op", "gates", "opset"), [("RNN", 1, 7), ("GRU", 3, 3), ("LSTM", 4, 1)])
def test_old_opsets(op, gates, opset):
    w, r, b = weights(gates)
    n_out = 3 if op == "LSTM" else 2
    kw = {"hidden_size": H}
    if opset < 7:
        kw["output_sequence"] = 1
    got = run_node(op, [X, w, r, b], n_out, opset, **kw)
    ref = run_node(op, [X, w, r, b], n_out, 14, hidden_size=H)
    assert_all_close(got, ref)
    if op == "RNN":  # and one written out: Ht = tanh(Xt W^T + Ht-1 R^T + Wb + Rb)
        h = np.zeros((BATCH, H), np.float32)
        for x in X:
            h = np.tanh(x @ w[0].T + h @ r[0].T + b[0, :H] + b[0, H:])
        np.testing.assert_allclose(got[1][0], h, rtol=1e-5, atol=1e-6)


def test_float64_and_float16_keep_dtype():
    w, r, _ = weights(1)
    for dt in (np.float64, np.float16):
        y, y_h = run_node("RNN", [X.astype(dt), w.astype(dt), r.astype(dt)], 2, 14, hidden_size=H)
        assert y.dtype == dt and y_h.dtype == dt and y.shape == (T, 1, BATCH, H)
