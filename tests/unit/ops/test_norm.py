"""BatchNormalization (every version), Instance/Layer/Group/RMS normalization,
LpNormalization, MeanVarianceNormalization, LRN; references are the spec formulas
written out in float64."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node

RNG = np.random.default_rng(2)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def bn_params(c: int):
    return rand(c), rand(c), rand(c), np.abs(rand(c)) + 0.5


def bn_ref(x, s, b, m, v, eps=1e-5):
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + eps) * s.reshape(sh) + b.reshape(sh)


@pytest.mark.parametrize(
    "opset,attrs",
    [
        (15, {}),
        (14, {"training_mode": 0}),
        (9, {}),
        (7, {"spatial": 1}),
        (6, {"is_test": 1}),
        (1, {"consumed_inputs": [0, 0, 0, 1, 1], "is_test": 1}),
    ],
)
def test_batchnorm_inference_every_version(opset, attrs):
    x = rand(2, 3, 4, 5)
    s, b, m, v = bn_params(3)
    (y,) = run_node("BatchNormalization", [x, s, b, m, v], opset=opset, epsilon=1e-3, **attrs)
    np.testing.assert_allclose(y, bn_ref(x, s, b, m, v, 1e-3), rtol=1e-5, atol=1e-5)


def test_batchnorm_training_mode_outputs():
    x = rand(4, 3, 2, 2)
    s, b, m, v = bn_params(3)
    y, rm, rv = run_node(
        "BatchNormalization", [x, s, b, m, v], n_outputs=3, opset=15, training_mode=1, momentum=0.8
    )
    xd = x.astype(np.float64)
    bm, bv = xd.mean(axis=(0, 2, 3)), xd.var(axis=(0, 2, 3))
    np.testing.assert_allclose(y, bn_ref(xd, s, b, bm, bv), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm, m * 0.8 + bm * 0.2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv, v * 0.8 + bv * 0.2, rtol=1e-5, atol=1e-6)


def test_batchnorm_spatial_0_per_activation_params():
    x = rand(2, 3, 4)
    s, b, m, v = (rand(3, 4), rand(3, 4), rand(3, 4), np.abs(rand(3, 4)) + 0.5)
    (y,) = run_node("BatchNormalization", [x, s, b, m, v], opset=7, spatial=0)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-5) * s + b, rtol=1e-5, atol=1e-5)


def test_instance_normalization():
    x, s, b = rand(2, 3, 4, 5), rand(3), rand(3)
    (y,) = run_node("InstanceNormalization", [x, s, b], opset=22, epsilon=1e-2)
    (y1,) = run_node("InstanceNormalization", [x, s, b], opset=1, epsilon=1e-2)
    xd = x.astype(np.float64)
    mu, var = xd.mean(axis=(2, 3), keepdims=True), xd.var(axis=(2, 3), keepdims=True)
    ref = (xd - mu) / np.sqrt(var + 1e-2) * s.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y1, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1, -3, 0])
def test_layer_normalization_outputs(axis):
    x = rand(2, 3, 4)
    a = axis % 3
    s, b = rand(*x.shape[a:]), rand(*x.shape[a:])
    y, mean, inv = run_node(
        "LayerNormalization", [x, s, b], n_outputs=3, opset=17, axis=axis, epsilon=1e-3
    )
    xd = x.astype(np.float64)
    axes = tuple(range(a, 3))
    mu, var = xd.mean(axis=axes, keepdims=True), xd.var(axis=axes, keepdims=True)
    np.testing.assert_allclose(y, (xd - mu) / np.sqrt(var + 1e-3) * s + b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inv, 1 / np.sqrt(var + 1e-3), rtol=1e-5)
    assert mean.shape == x.shape[:a] + (1,) * (3 - a)


def test_group_normalization_18_per_group_vs_21_per_channel():
    x = rand(2, 4, 3)
    xd = x.astype(np.float64).reshape(2, 2, 6)
    norm = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5)
    norm = norm.reshape(2, 4, 3)
    sg, bg = rand(2), rand(2)  # opset 18: one (scale, bias) per group
    (y18,) = run_node("GroupNormalization", [x, sg, bg], opset=18, num_groups=2)
    ref18 = norm * np.repeat(sg, 2).reshape(1, 4, 1) + np.repeat(bg, 2).reshape(1, 4, 1)
    np.testing.assert_allclose(y18, ref18, rtol=1e-4, atol=1e-5)
    sc, bc = rand(4), rand(4)  # opset 21: per channel
    (y21,) = run_node("GroupNormalization", [x, sc, bc], opset=21, num_groups=2)
    np.testing.assert_allclose(
        y21, norm * sc.reshape(1, 4, 1) + bc.reshape(1, 4, 1), rtol=1e-4, atol=1e-5
    )


def test_rms_normalization():
    x, s = rand(2, 3, 4), rand(3, 4)
    (y,) = run_node("RMSNormalization", [x, s], opset=23, axis=1, epsilon=1e-4)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd**2).mean(axis=(1, 2), keepdims=True) + 1e-4) * s
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_float16_layer_norm_keeps_dtype():
    x, s = rand(2, 8).astype(np.float16), rand(8).astype(np.float16)
    y, mean, inv = run_node("LayerNormalization", [x, s], n_outputs=3, opset=17)
    assert y.dtype == np.float16 and mean.dtype == np.float32 and inv.dtype == np.float32


def test_lp_normalization():
    x = np.array([[3, -4], [0, 0]], np.float32)
    (l2,) = run_node("LpNormalization", [x], opset=1, axis=1, p=2)
    (l1,) = run_node("LpNormalization", [x], opset=22, axis=1, p=1)
    np.testing.assert_allclose(l2, [[0.6, -0.8], [0, 0]], rtol=1e-6)
    np.testing.assert_allclose(l1, [[3 / 7, -4 / 7], [0, 0]], rtol=1e-6)


def test_mean_variance_normalization():
    x = rand(2, 3, 4, 5)
    (y,) = run_node("MeanVarianceNormalization", [x], opset=13)
    xd = x.astype(np.float64)
    mu, sd = xd.mean(axis=(0, 2, 3), keepdims=True), xd.std(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (xd - mu) / (sd + 1e-9), rtol=1e-4, atol=1e-5)
    (y9,) = run_node("MeanVarianceNormalization", [x], opset=9, axes=[1])
    mu, sd = xd.mean(axis=1, keepdims=True), xd.std(axis=1, keepdims=True)
    np.testing.assert_allclose(y9, (xd - mu) / (sd + 1e-9), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [3, 4])
def test_lrn_window_over_channels(size):
    x = rand(1, 6, 2, 2)
    (y,) = run_node("LRN", [x], opset=13, size=size, alpha=0.01, beta=0.6, bias=2.0)
    xd = x.astype(np.float64)
    ref = np.empty_like(xd)
    lo, hi = (size - 1) // 2, int(np.ceil((size - 1) / 2))
    for c in range(6):
        sq = (xd[:, max(0, c - lo) : min(6, c + hi + 1)] ** 2).sum(axis=1)
        ref[:, c] = xd[:, c] / (2.0 + 0.01 / size * sq) ** 0.6
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
