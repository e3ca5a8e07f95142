"""com.microsoft norms and activations against onnxruntime 1.x's CPU kernels (the
oracle), and the GPU-only ones (BiasAdd, BiasSplitGelu, BiasSoftmax) against float64
numpy written from docs/ContribOperators.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import node_model
from tests.unit.ops._ort_node import assert_like_ort

R = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("op", ["Gelu", "QuickGelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_unary_gelus(op, dtype):
    tol = 1e-4 if dtype == np.float32 else 2e-3
    assert_like_ort(op, [(f32(2, 3, 16) * 3).astype(dtype)], rtol=tol, atol=tol)


def test_quick_gelu_alpha():
    assert_like_ort("QuickGelu", [f32(4, 8) * 5], alpha=1.3)


@pytest.mark.parametrize("bias", [True, False])
def test_fast_gelu(bias):
    assert_like_ort("FastGelu", [f32(2, 5, 24) * 3, f32(24) if bias else None])


def test_fast_gelu_fp16():
    x, b = f32(3, 8).astype(np.float16), f32(8).astype(np.float16)
    assert_like_ort("FastGelu", [x, b], rtol=2e-3, atol=2e-3)


def test_bias_gelu():
    assert_like_ort("BiasGelu", [f32(2, 5, 24) * 3, f32(24)])


@pytest.mark.parametrize("n_outputs", [1, 2, 3, 4])
@pytest.mark.parametrize("beta,bias", [(True, True), (False, False), (True, False)])
def test_skip_layer_normalization(n_outputs, beta, bias):
    d = 32
    args = [f32(2, 7, d), f32(2, 7, d), f32(d), f32(d) if beta else None, f32(d) if bias else None]
    assert_like_ort("SkipLayerNormalization", args, n_outputs, epsilon=1e-5)


def test_skip_layer_normalization_broadcast_skip_and_fp16():
    assert_like_ort("SkipLayerNormalization", [f32(3, 5, 8), f32(5, 8), f32(8), None, None], 4)
    h = [a.astype(np.float16) for a in (f32(2, 5, 8), f32(2, 5, 8), f32(8), f32(8))]
    assert_like_ort("SkipLayerNormalization", h, 4, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("n_outputs", [1, 4])
@pytest.mark.parametrize("bias", [True, False])
def test_skip_simplified_layer_normalization(n_outputs, bias):
    args = [f32(2, 6, 16), f32(2, 6, 16), f32(16), f32(16) if bias else None]
    assert_like_ort("SkipSimplifiedLayerNormalization", args, n_outputs, epsilon=1e-6)


@pytest.mark.parametrize("axis,n_outputs", [(-1, 1), (-1, 2), (1, 2)])
def test_simplified_layer_normalization(axis, n_outputs):
    x = f32(2, 4, 8)
    scale = f32(*x.shape[axis:])
    assert_like_ort("SimplifiedLayerNormalization", [x, scale], n_outputs, domain="", axis=axis)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_layer_normalization_v1(n_outputs):
    # opset 13: onnx has no LayerNormalization there, onnxruntime's contrib one runs
    assert_like_ort("LayerNormalization", [f32(2, 5, 8), f32(8), f32(8)], n_outputs, domain="")


def _ids(hi: int, *shape: int) -> np.ndarray:
    return R.integers(0, hi, shape).astype(np.int32)


@pytest.mark.parametrize(
    "case", ["full", "no_segment", "position_ids", "batch_position_ids", "no_mask", "holes"]
)
def test_embed_layer_normalization(case):
    b, t, d = 3, 7, 16
    mask = np.ones((b, t), np.int32)
    mask[1, 4:] = 0
    mask[2, 1:] = 0
    args = [_ids(30, b, t), _ids(2, b, t), f32(30, d), f32(12, d), f32(2, d), f32(d), f32(d), mask]
    if case == "no_segment":
        args[1] = args[4] = None
    elif case == "position_ids":
        args.append((np.arange(t, dtype=np.int32) + 2)[None])
    elif case == "batch_position_ids":
        args.append(_ids(12, b, t))
    elif case == "no_mask":
        args = args[:7]
    elif case == "holes":  # mask_index counts the non-zeros, wherever they are
        args[7] = np.array([[1, 1, 0, 1, 0, 0, 1], [0] + [1] * 6, [1] * 7], np.int32)
    attrs = {"mask_index_type": 0} if case == "holes" else {}
    assert_like_ort("EmbedLayerNormalization", args, 3, epsilon=1e-5, **attrs)


def _run(op_type, inputs, **attrs):
    model, feeds = node_model(op_type, inputs, opset=1, domain="com.microsoft", **attrs)
    return InferenceSession(model).run(None, feeds)[0]


def _gelu64(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def test_bias_add():
    # CUDA-only in onnxruntime: Y = X + bias + skip (ContribOperators.md BiasAdd)
    x, bias, skip = f32(2, 4, 8), f32(8), f32(2, 4, 8)
    want = x.astype(np.float64) + bias + skip
    np.testing.assert_allclose(_run("BiasAdd", [x, bias, skip]), want, rtol=1e-5, atol=1e-6)


def test_bias_split_gelu():
    # CUDA-only in onnxruntime: left half of X + bias times Gelu of the right half
    x, bias = f32(2, 4, 16), f32(16)
    s = x.astype(np.float64) + bias
    want = s[..., :8] * _gelu64(s[..., 8:])
    np.testing.assert_allclose(_run("BiasSplitGelu", [x, bias]), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [1, 3])
def test_bias_softmax(axis):
    # CUDA-only in onnxruntime: softmax(data + bias) over the axes from `axis` on
    x, bias = f32(2, 3, 4, 5), f32(1, 3, 4, 5)
    s = x.astype(np.float64) + bias
    rows = s.reshape(int(np.prod(s.shape[:axis])), -1)
    e = np.exp(rows - rows.max(1, keepdims=True))
    want = (e / e.sum(1, keepdims=True)).reshape(s.shape)
    got = _run("BiasSoftmax", [x, bias], axis=axis, is_inner_broadcast=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("channels_last", [1, 0])
@pytest.mark.parametrize("activation", [0, 1])
def test_group_norm(channels_last, activation):
    # CUDA-only in onnxruntime: float64 from ContribOperators.md's GroupNorm (NHWC)
    x, gamma, beta = f32(2, 3, 5, 8), f32(8), f32(8)
    x64 = x.astype(np.float64).reshape(2, 15, 4, 2)  # 4 groups of 2 channels
    mean = x64.mean(axis=(1, 3), keepdims=True)
    var = x64.var(axis=(1, 3), keepdims=True)
    want = ((x64 - mean) / np.sqrt(var + 1e-5)).reshape(x.shape) * gamma + beta
    if activation:
        want = want / (1 + np.exp(-want))
    feed = x if channels_last else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = _run(
        "GroupNorm",
        [feed, gamma, beta],
        activation=activation,
        groups=4,
        channels_last=channels_last,
    )
    got = got if channels_last else got.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
