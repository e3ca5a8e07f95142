"""com.microsoft QLinear* elementwise / pool / concat / softmax and Q/DQ vs onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._ms_node import assert_within_one_step, ours_and_ort

RNG = np.random.default_rng(23)
TYPES = [np.uint8, np.int8]


def _q(shape, dt):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dt)


def _s(v):
    return np.array(v, np.float32)


def _z(v, dt):
    return np.array(v, dt)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_broadcast(op_type, dt):
    a, b = _q((2, 3, 8), dt), _q((3, 1), dt)
    zp = (128, 120, 130) if dt == np.uint8 else (0, -5, 3)
    ins = [a, _s(0.05), _z(zp[0], dt), b, _s(0.07), _z(zp[1], dt), _s(0.11), _z(zp[2], dt)]
    (got,), (want,) = ours_and_ort(op_type, ins, n_feeds=4)
    assert_within_one_step(got, want)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize(
    ("op_type", "attrs"),
    [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.2})],
)
def test_qlinear_unary_table(op_type, attrs, dt):
    info = np.iinfo(dt)
    x = np.arange(info.min, info.max + 1).astype(dt).reshape(4, 64)  # every code
    zx, zy = (100, 5) if dt == np.uint8 else (-10, -120)
    ins = [x, _s(0.06), _z(zx, dt), _s(1 / 250), _z(zy, dt)]
    (got,), (want,) = ours_and_ort(op_type, ins, **attrs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", TYPES)
def test_qlinear_concat_requantizes_each_input(dt):
    x1, x2, x3 = _q((2, 3, 4), dt), _q((2, 5, 4), dt), _q((2, 1, 4), dt)
    zy = 128 if dt == np.uint8 else 0
    ins = [_s(0.1), _z(zy, dt)]
    ins += [x1, _s(0.1), _z(zy, dt), x2, _s(0.03), _z(zy // 2, dt), x3, _s(0.5), _z(3, dt)]
    # feeds are the X inputs; scales / zero points are initializers as the quantizer emits
    (got,), (want,) = ours_and_ort("QLinearConcat", ins, n_feeds=0, axis=1)
    assert_within_one_step(got, want)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        {"kernel_shape": [2, 3], "count_include_pad": 1, "pads": [0, 1, 1, 0], "ceil_mode": 1},
    ],
)
def test_qlinear_average_pool(attrs, channels_last, dt):
    x = _q((2, 7, 9, 3) if channels_last else (2, 3, 7, 9), dt)
    zx, zy = (110, 140) if dt == np.uint8 else (-3, 7)
    ins = [x, _s(0.05), _z(zx, dt), _s(0.04), _z(zy, dt)]
    (got,), (want,) = ours_and_ort("QLinearAveragePool", ins, channels_last=channels_last, **attrs)
    assert_within_one_step(got, want)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(channels_last, dt):
    x = _q((2, 5, 6, 4), dt)
    zx, zy = (120, 128) if dt == np.uint8 else (2, -4)
    ins = [x, _s(0.05), _z(zx, dt), _s(0.01), _z(zy, dt)]
    (got,), (want,) = ours_and_ort("QLinearGlobalAveragePool", ins, channels_last=channels_last)
    assert_within_one_step(got, want)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize(("opset", "axis"), [(13, -1), (13, 1), (12, 1)])
def test_qlinear_softmax(opset, axis, dt):
    x = _q((2, 6, 10), dt)
    zx = 128 if dt == np.uint8 else 0
    zy = 0 if dt == np.uint8 else -128  # the quantizer's fixed [0, 1] output range
    ins = [x, _s(0.08), _z(zx, dt), _s(1 / 256), _z(zy, dt)]
    (got,), (want,) = ours_and_ort("QLinearSoftmax", ins, opset=opset, axis=axis)
    assert_within_one_step(got, want)


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.uint16, np.int16])
def test_ms_quantize_dequantize_per_axis(dt):
    x = RNG.normal(size=(3, 4, 5)).astype(np.float32) * 50
    scale = np.array([0.3, 0.5, 0.7, 0.9], np.float32)
    zp = np.array([1, 2, 3, 4], dt)
    (q,), (want_q,) = ours_and_ort("QuantizeLinear", [x, scale, zp], axis=1)
    np.testing.assert_array_equal(q, want_q)
    (d,), (want_d,) = ours_and_ort("DequantizeLinear", [want_q, scale, zp], axis=1)
    np.testing.assert_allclose(d, want_d, rtol=1e-6)


@pytest.mark.parametrize("group", [2, 4])  # 4: depthwise, channel multiplier 2
@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("per_channel", [False, True])
def test_ms_qlinear_conv(channels_last, per_channel, group):
    x = _q((1, 6, 7, 4) if channels_last else (1, 4, 6, 7), np.uint8)
    w = _q((8, 4 // group, 3, 3), np.int8)
    ws = RNG.uniform(0.002, 0.02, 8 if per_channel else ()).astype(np.float32)
    wz = np.zeros(8 if per_channel else (), np.int8)
    bias = RNG.integers(-500, 500, 8).astype(np.int32)
    ins = [x, _s(0.03), _z(130, np.uint8), w, ws, wz, _s(0.05), _z(120, np.uint8), bias]
    attrs = {"group": group, "pads": [1, 1, 1, 1], "strides": [2, 1]}
    attrs["channels_last"] = channels_last
    (got,), (want,) = ours_and_ort("QLinearConv", ins, **attrs)
    assert_within_one_step(got, want)
