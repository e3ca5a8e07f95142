"""com.microsoft DynamicQuantizeLSTM vs onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.linalg.qlstm import qlstm_recurrence, recurrent_weight
from onnxexec.ops.contrib.quant_rnn import recurrence_reference
from tests.unit.ops._ms_node import ours_and_ort

RNG = np.random.default_rng(230)


def _weights(shape, dt, n_dirs, per_column):
    info = np.iinfo(dt)
    w = RNG.integers(info.min, info.max + 1, shape).astype(dt)
    cols = shape[-1] if per_column else 1
    scale = RNG.uniform(0.002, 0.01, (n_dirs, cols)).astype(np.float32)
    zero = np.full((n_dirs, cols), 0 if dt == np.int8 else 128, dt)
    if not per_column:
        scale, zero = scale.reshape(n_dirs), zero.reshape(n_dirs)
    return w, scale, zero


@pytest.mark.parametrize(
    ("direction", "dt", "per_column", "extras"),
    [
        ("forward", np.int8, False, False),
        ("reverse", np.uint8, True, True),
        ("bidirectional", np.int8, True, True),
    ],
)
def test_dynamic_quantize_lstm(direction, dt, per_column, extras):
    t_len, batch, inp, hid = 5, 3, 12, 8
    nd = 2 if direction == "bidirectional" else 1
    x = RNG.normal(size=(t_len, batch, inp)).astype(np.float32)
    w, ws, wz = _weights((nd, inp, 4 * hid), dt, nd, per_column)
    r, rs, rz = _weights((nd, hid, 4 * hid), dt, nd, per_column)
    b = RNG.normal(size=(nd, 8 * hid)).astype(np.float32) if extras else None
    h0 = RNG.normal(size=(nd, batch, hid)).astype(np.float32) if extras else None
    c0 = RNG.normal(size=(nd, batch, hid)).astype(np.float32) if extras else None
    p = RNG.normal(size=(nd, 3 * hid)).astype(np.float32) * 0.1 if extras else None
    lens = np.array([5, 2, 4], np.int32) if extras else None
    ins = [x, w, r, b, lens, h0, c0, p, ws, wz, rs, rz]
    got, want = ours_and_ort(
        "DynamicQuantizeLSTM", ins, n_outputs=3, direction=direction, hidden_size=hid
    )
    for g, e in zip(got, want, strict=True):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_clip_and_input_forget_vs_onnxruntime():
    t_len, batch, inp, hid = 6, 2, 10, 8
    x = RNG.normal(size=(t_len, batch, inp)).astype(np.float32)
    w, ws, wz = _weights((1, inp, 4 * hid), np.int8, 1, False)
    r, rs, rz = _weights((1, hid, 4 * hid), np.int8, 1, False)
    p = RNG.normal(size=(1, 3 * hid)).astype(np.float32) * 0.1
    ins = [x, w, r, None, np.array([6, 3], np.int32), None, None, p, ws, wz, rs, rz]
    got, want = ours_and_ort(
        "DynamicQuantizeLSTM", ins, n_outputs=3, hidden_size=hid, clip=0.5, input_forget=1
    )
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hid", [16, 520])  # 520: sums pass 2^24 (float32 of them rounds)
def test_kernel_matches_numpy_recurrence(hid):
    # kernels/linalg/qlstm.py (default activations) against the numpy steps it replaces
    t_len, batch = 7, 3
    xw = RNG.normal(size=(t_len, batch, 4 * hid)).astype(np.float32)
    lens = np.array([7, 4, 1], np.int64)
    r = RNG.integers(0, 256, (hid, 4 * hid)).astype(np.uint8)
    rs = RNG.uniform(0.002, 0.01, 4 * hid).astype(np.float32)
    h0, c0 = (RNG.normal(size=(batch, hid)).astype(np.float32) for _ in range(2))
    p = RNG.normal(size=3 * hid).astype(np.float32) * 0.1
    acts = [lambda v: 1 / (1 + np.exp(-v)), np.tanh, np.tanh]
    for clip, forget in ((None, 0), (0.7, 1)):
        clipf = (lambda v: v) if clip is None else (lambda v, c=clip: np.clip(v, -c, c))
        want = recurrence_reference(xw, lens, r, rs, 128, h0, c0, p, (acts, clipf, forget))
        rk = recurrent_weight(r, 128)
        got = qlstm_recurrence(xw, lens, rk, rs, h0, c0, p, clip, forget)
        for g, e in zip(got, want, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
