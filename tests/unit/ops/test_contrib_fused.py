"""com.microsoft FusedMatMul and FusedConv against onnxruntime's CPU kernels."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._ort_node import assert_like_ort

R = np.random.default_rng(2)


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


MATMUL = {
    "alpha": ((2, 3, 4), (4, 5), {"alpha": 0.5}),
    "transB": ((2, 3, 4), (5, 4), {"transB": 1}),
    "transA": ((2, 4, 3), (4, 5), {"transA": 1}),
    "batched": ((2, 3, 4), (2, 4, 5), {}),
    "transBatchA": ((3, 2, 4), (2, 4, 5), {"transBatchA": 1}),
    "transBatchA_transA": ((4, 2, 3), (2, 4, 5), {"transBatchA": 1, "transA": 1}),
    "transBatchB": ((2, 3, 4), (4, 2, 5), {"transBatchB": 1}),
    "transBatchB_transB": ((2, 3, 4), (5, 2, 4), {"transBatchB": 1, "transB": 1}),
    "rank4_transBatchA": ((3, 2, 6, 4), (2, 6, 4, 5), {"transBatchA": 1, "alpha": 2.0}),
    "2d": ((3, 4), (4, 5), {"alpha": 0.25}),
}


@pytest.mark.parametrize("case", sorted(MATMUL))
def test_fused_matmul(case):
    a, b, attrs = MATMUL[case]
    assert_like_ort("FusedMatMul", [f32(*a), f32(*b)], **attrs)


CONV = {
    "relu": ("Relu", [], {}),
    "relu_z": ("Relu", [], {"z": True}),
    "leaky": ("LeakyRelu", [0.2], {}),
    "clip_pads": ("Clip", [-0.5, 0.7], {"pads": [1, 1, 1, 1]}),
    "hard_sigmoid": ("HardSigmoid", [0.3, 0.4], {}),
    "tanh_strides": ("Tanh", [], {"strides": [2, 2]}),
    "sigmoid_group": ("Sigmoid", [], {"group": 3}),
}


@pytest.mark.parametrize("case", sorted(CONV))
def test_fused_conv(case):
    act, params, extra = CONV[case]
    extra = dict(extra)
    group = extra.get("group", 1)
    x, w, b = f32(2, 6, 9, 9), f32(6, 6 // group, 3, 3), f32(6)
    inputs = [x, w, b]
    if extra.pop("z", False):
        inputs.append(f32(2, 6, 7, 7))
    kw = {"activation_params": params} if params else {}
    assert_like_ort("FusedConv", inputs, activation=act, **kw, **extra)
