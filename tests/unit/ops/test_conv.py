"""Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, CausalConvWithState.

References are naive loop convolutions written out here (one output element at a
time, straight from the spec's definition) and onnxruntime where it is simpler.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.unit.ops._node import run_node, run_ort

RNG = np.random.default_rng(0)


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def naive_conv(x, w, b=None, strides=None, pads=None, dilations=None, group=1):
    """Direct definition: y[n, m, o] = sum_{c, k} x_pad[n, g*Cg + c, o*s + k*d] * w[m, c, k]."""
    n_b = x.shape[0]
    nd = x.ndim - 2
    m, cg = w.shape[:2]
    ks = w.shape[2:]
    s = strides or [1] * nd
    d = dilations or [1] * nd
    p = pads or [0] * (2 * nd)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p[i], p[nd + i]) for i in range(nd)])
    out = [(xp.shape[2 + i] - ((ks[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nd)]
    y = np.zeros((n_b, m, *out))
    mg = m // group
    for n, oc in itertools.product(range(n_b), range(m)):
        g = oc // mg
        for o in itertools.product(*(range(v) for v in out)):
            acc = 0.0
            for ci in range(cg):
                for k in itertools.product(*(range(v) for v in ks)):
                    pos = tuple(o[i] * s[i] + k[i] * d[i] for i in range(nd))
                    acc += xp[(n, g * cg + ci, *pos)] * w[(oc, ci, *k)]
            y[(n, oc, *o)] = acc
    if b is not None:
        y += b.reshape((1, -1) + (1,) * nd)
    return y


def naive_conv_transpose(x, w, strides, pads, dilations=None, group=1, output_padding=None):
    """Scatter definition: each x[n, c, i] adds x * w[c, m, k] at i*s + k*d - pad_begin."""
    n_b, c = x.shape[:2]
    nd = x.ndim - 2
    mg = w.shape[1]
    ks = w.shape[2:]
    d = dilations or [1] * nd
    op_ = output_padding or [0] * nd
    full = [(x.shape[2 + i] - 1) * strides[i] + (ks[i] - 1) * d[i] + 1 for i in range(nd)]
    out = [full[i] + op_[i] - pads[i] - pads[nd + i] for i in range(nd)]
    y = np.zeros((n_b, mg * group, *[f + op_[i] for i, f in enumerate(full)]))
    cg = c // group
    for n, ci in itertools.product(range(n_b), range(c)):
        g = ci // cg
        for i in itertools.product(*(range(v) for v in x.shape[2:])):
            for mi in range(mg):
                for k in itertools.product(*(range(v) for v in ks)):
                    pos = tuple(i[a] * strides[a] + k[a] * d[a] for a in range(nd))
                    y[(n, g * mg + mi, *pos)] += x[(n, ci, *i)] * w[(ci, mi, *k)]
    sl = tuple(slice(pads[a], pads[a] + out[a]) for a in range(nd))
    return y[(slice(None), slice(None), *sl)]


@pytest.mark.parametrize(
    "shape,wshape,attrs",
    [
        ((1, 3, 7, 6), (4, 3, 3, 3), {}),
        ((2, 3, 7, 6), (4, 3, 3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
        ((1, 2, 9, 9), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [1, 1, 1, 1]}),
        ((1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 4, 5, 5), (8, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),  # depthwise x2
        ((1, 3, 5, 5), (3, 1, 3, 3), {"group": 3, "strides": [2, 2]}),  # depthwise
        ((2, 8, 4, 5), (6, 8, 1, 1), {}),  # pointwise
        ((1, 8, 6, 5), (8, 2, 1, 1), {"group": 4, "strides": [2, 2]}),  # grouped strided 1x1
        ((1, 2, 11), (3, 2, 4), {"strides": [3], "pads": [2, 1], "dilations": [2]}),  # 1-D
        ((1, 2, 5, 4, 6), (2, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),  # 3-D
    ],
)
def test_conv_matches_definition(shape, wshape, attrs):
    x, w, b = rand(*shape), rand(*wshape), rand(wshape[0])
    (y,) = run_node("Conv", [x, w, b], opset=22, **attrs)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, naive_conv(x, w, b, **attrs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("auto_pad,begin,end", [("SAME_UPPER", 0, 1), ("SAME_LOWER", 1, 0)])
def test_conv_auto_pad_same_with_stride(auto_pad, begin, end):
    # in 6, k 3, s 2: out = ceil(6/2) = 3, total pad = (3-1)*2 + 3 - 6 = 1 (odd):
    # SAME_UPPER puts it at the end, SAME_LOWER at the beginning.
    x, w = rand(1, 2, 6, 6), rand(3, 2, 3, 3)
    (y,) = run_node("Conv", [x, w], opset=11, auto_pad=auto_pad, strides=[2, 2])
    ref = naive_conv(x, w, strides=[2, 2], pads=[begin, begin, end, end])
    assert y.shape == (1, 3, 3, 3)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_conv_valid_and_old_opset():
    x, w = rand(1, 1, 5, 5), rand(1, 1, 2, 2)
    (y,) = run_node("Conv", [x, w], opset=1, auto_pad="VALID", strides=[2, 2])
    np.testing.assert_allclose(y, naive_conv(x, w, strides=[2, 2]), rtol=1e-5, atol=1e-5)


def test_conv_float16_and_float64_keep_dtype():
    for dt in (np.float16, np.float64):
        x, w = rand(1, 2, 4, 4, dtype=dt), rand(2, 2, 3, 3, dtype=dt)
        (y,) = run_node("Conv", [x, w], opset=22)
        assert y.dtype == dt
        np.testing.assert_allclose(y, naive_conv(x, w), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "shape,wshape,attrs",
    [
        ((1, 2, 3, 3), (2, 3, 3, 3), {"strides": [1, 1], "pads": [0, 0, 0, 0]}),
        ((1, 2, 3, 4), (2, 2, 3, 2), {"strides": [3, 2], "pads": [1, 0, 2, 1]}),
        ((1, 4, 3, 3), (4, 1, 2, 2), {"strides": [2, 2], "pads": [0, 0, 0, 0], "group": 2}),
        (
            (1, 1, 3, 3),
            (1, 2, 2, 2),
            {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [2, 2]},
        ),
        (
            (1, 1, 3, 3),
            (1, 1, 3, 3),
            {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
        ),
        ((1, 1, 5), (1, 2, 3), {"strides": [2], "pads": [1, 0]}),
    ],
)
def test_conv_transpose_matches_definition(shape, wshape, attrs):
    x, w = rand(*shape), rand(*wshape)
    (y,) = run_node("ConvTranspose", [x, w], opset=22, **attrs)
    np.testing.assert_allclose(y, naive_conv_transpose(x, w, **attrs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": [2, 2], "output_shape": [8, 9]},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
        {"strides": [3, 2], "output_shape": [10, 8], "output_padding": [1, 1]},
    ],
)
def test_conv_transpose_output_shape_and_auto_pad_vs_onnxruntime(attrs):
    x, w, b = rand(1, 2, 4, 4), rand(2, 3, 3, 3), rand(3)
    (y,) = run_node("ConvTranspose", [x, w, b], opset=11, **attrs)
    (ref,) = run_ort("ConvTranspose", [x, w, b], opset=11, **attrs)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_conv_transpose_same_upper_shape_is_input_times_stride():
    (y,) = run_node(
        "ConvTranspose",
        [rand(1, 1, 3, 5), rand(1, 1, 4, 4)],
        opset=1,
        strides=[2, 3],
        auto_pad="SAME_UPPER",
    )
    assert y.shape == (1, 1, 6, 15)


def test_conv_integer_zero_points():
    x = RNG.integers(0, 255, (1, 2, 4, 4)).astype(np.uint8)
    w = RNG.integers(0, 255, (3, 2, 2, 2)).astype(np.uint8)
    xz, wz = np.uint8(100), np.uint8(130)
    (y,) = run_node("ConvInteger", [x, w, np.array(xz), np.array(wz)], opset=10, pads=[1, 1, 0, 0])
    xs = x.astype(np.int64) - 100
    ws = w.astype(np.int64) - 130
    # padding is zero in the shifted domain
    ref = naive_conv(xs.astype(np.float64), ws.astype(np.float64), pads=[1, 1, 0, 0])
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, ref.astype(np.int64))


def test_qlinear_conv_per_channel():
    # y = sat(round(acc * x_scale * w_scale[m] / y_scale) + y_zero_point), acc exact
    # (onnxruntime's AVX2 u8s8 path saturates int16 partial sums, so it is no reference).
    x = RNG.integers(0, 255, (1, 3, 5, 5)).astype(np.uint8)
    w = RNG.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8)
    ws = np.array([0.01, 0.02, 0.015, 0.03], np.float32)
    bias = RNG.integers(-500, 500, 4).astype(np.int32)
    ins = [
        x,
        np.array(0.05, np.float32),
        np.array(120, np.uint8),
        w,
        ws,
        np.zeros(4, np.int8),
        np.array(0.2, np.float32),
        np.array(128, np.uint8),
        bias,
    ]
    (y,) = run_node("QLinearConv", ins, opset=10, pads=[1, 1, 1, 1])
    acc = naive_conv(x.astype(np.float64) - 120, w.astype(np.float64), pads=[1, 1, 1, 1])
    acc += bias.reshape(1, -1, 1, 1)
    real = acc * (np.float32(0.05) * ws / np.float32(0.2)).reshape(1, -1, 1, 1)
    ref = np.clip(np.rint(real) + 128, 0, 255)
    assert y.dtype == np.uint8
    assert np.abs(y.astype(int) - ref).max() <= 1


def test_deform_conv_zero_offset_is_conv_and_integer_offset_shifts():
    x, w = rand(1, 2, 5, 5), rand(3, 2, 2, 2)
    off = np.zeros((1, 2 * 4, 4, 4), np.float32)
    (y,) = run_node("DeformConv", [x, w, off], opset=19)
    np.testing.assert_allclose(y, naive_conv(x, w), rtol=1e-4, atol=1e-4)
    # offset +1 along W for every tap == conv of the input shifted left by one (zero fill)
    off[:, 1::2] = 1.0
    mask = np.full((1, 4, 4, 4), 0.5, np.float32)
    (y2,) = run_node("DeformConv", [x, w, off, None, mask], opset=22)
    shifted = np.concatenate([x[..., 1:], np.zeros_like(x[..., :1])], axis=-1)
    np.testing.assert_allclose(y2, 0.5 * naive_conv(shifted, w), rtol=1e-4, atol=1e-4)


def test_causal_conv_with_state_past_state_and_silu():
    b_, c, length, k = 2, 3, 4, 3
    x, w, bias, past = rand(b_, c, length), rand(c, 1, k), rand(c), rand(b_, c, k - 1)
    y, state = run_node(
        "CausalConvWithState", [x, w, bias, past], n_outputs=2, opset=27, activation="silu"
    )
    full = np.concatenate([past, x], axis=2).astype(np.float64)
    ref = np.zeros((b_, c, length))
    for t in range(length):
        ref[:, :, t] = (full[:, :, t : t + k] * w[:, 0]).sum(-1) + bias
    ref = ref / (1 + np.exp(-ref))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(state, full[:, :, -(k - 1) :].astype(np.float32))


def test_causal_conv_without_state_pads_zeros():
    x, w = rand(1, 2, 1), rand(2, 1, 4)
    y, state = run_node("CausalConvWithState", [x, w], n_outputs=2, opset=27)
    np.testing.assert_allclose(y[..., 0], x[..., 0] * w[:, 0, -1], rtol=1e-6)
    np.testing.assert_array_equal(state, np.concatenate([np.zeros((1, 2, 2)), x], -1))
