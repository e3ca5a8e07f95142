"""com.microsoft Attention and MultiHeadAttention against onnxruntime's CPU kernels over
mask formats, past state, attention bias, scale and head layouts."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import node_model
from tests.unit.ops._ort_node import assert_like_ort

R = np.random.default_rng(1)
B, S, L, D, N = 2, 5, 6, 16, 4
H = D // N


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def _raw_mask(*shape: int) -> np.ndarray:
    m = (R.random(shape) > 0.3).astype(np.int32)
    m[..., 0] = 1  # every query keeps a key: a fully masked row is ill-conditioned
    return m


ATTENTION_CASES = {
    "plain": lambda x, w, b: ([x, w, b], {}),
    "no_bias": lambda x, w, b: ([x, w], {}),
    "mask_end": lambda x, w, b: ([x, w, b, np.array([5, 3], np.int32)], {}),
    "mask_end_start": lambda x, w, b: ([x, w, b, np.array([5, 4, 0, 1], np.int32)], {}),
    "mask_2d": lambda x, w, b: ([x, w, b, _raw_mask(B, S)], {}),
    "mask_3d": lambda x, w, b: ([x, w, b, _raw_mask(B, S, S)], {}),
    "unidirectional": lambda x, w, b: ([x, w, b], {"unidirectional": 1}),
    "attention_bias": lambda x, w, b: ([x, w, b, None, None, f32(1, N, S, S)], {}),
    "scale": lambda x, w, b: ([x, w, b], {"scale": 0.3}),
    "mask_filter_value": lambda x, w, b: (
        [x, w, b, np.array([5, 3], np.int32)],
        {"mask_filter_value": -3e4},
    ),
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_attention(case):
    args, attrs = ATTENTION_CASES[case](f32(B, S, D), f32(D, 3 * D) * 0.3, f32(3 * D))
    assert_like_ort("Attention", args, num_heads=N, **attrs)


def test_attention_past_present_causal():
    past = f32(2, B, N, 3, H)
    mask = _raw_mask(B, S + 3)
    args = [f32(B, S, D), f32(D, 3 * D) * 0.3, f32(3 * D), mask, past]
    assert_like_ort("Attention", args, 2, num_heads=N, unidirectional=1)


def test_attention_qkv_hidden_sizes():
    args = [f32(B, S, D), f32(D, 2 * D + 8) * 0.3, f32(2 * D + 8)]
    assert_like_ort("Attention", args, num_heads=N, qkv_hidden_sizes=[D, D, 8])


def test_attention_fp16():
    args = [a.astype(np.float16) for a in (f32(B, S, D), f32(D, 3 * D) * 0.3, f32(3 * D))]
    assert_like_ort("Attention", args, num_heads=N, rtol=2e-3, atol=2e-3)


MHA_CASES = {
    "plain": lambda q, k, v: [q, k, v],
    "bias": lambda q, k, v: [q, k, v, f32(3 * D)],
    "key_padding_2d": lambda q, k, v: [q, k, v, None, _raw_mask(B, L)],
    "key_padding_1d": lambda q, k, v: [q, k, v, None, np.array([6, 2], np.int32)],
    "attention_bias": lambda q, k, v: [q, k, v, None, None, f32(B, N, S, L)],
    "cross_bnsh": lambda q, k, v: [q, f32(B, N, L, H), f32(B, N, L, H)],
}


@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_multi_head_attention(case):
    args = MHA_CASES[case](f32(B, S, D), f32(B, L, D), f32(B, L, D))
    assert_like_ort("MultiHeadAttention", args, num_heads=N)


def test_multi_head_attention_past_and_causal():
    args = [f32(B, S, D), f32(B, S, D), f32(B, S, D), f32(3 * D), None, None]
    args += [f32(B, N, 3, H), f32(B, N, 3, H)]
    assert_like_ort("MultiHeadAttention", args, 3, num_heads=N, unidirectional=1)


def test_multi_head_attention_fp16():
    args = [f32(B, S, D).astype(np.float16) for _ in range(3)]
    assert_like_ort("MultiHeadAttention", args, num_heads=N, rtol=2e-3, atol=2e-3)


def _ours(inputs, **attrs):
    model, feeds = node_model(
        "MultiHeadAttention", inputs, opset=1, domain="com.microsoft", **attrs
    )
    return InferenceSession(model).run(None, feeds)[0]


def test_multi_head_attention_packed_layouts():
    # onnxruntime's CPU kernel refuses packed QKV / KV; ContribOperators.md defines them
    # as the (B, S, N, 3, H) / (B, L, N, 2, H) interleave of the separate inputs, whose
    # results the cases above check against onnxruntime
    q, k, v, bias = f32(B, S, D), f32(B, S, D), f32(B, S, D), f32(3 * D)
    want = assert_like_ort("MultiHeadAttention", [q, k, v, bias], num_heads=N)[0]

    def heads(a):
        return a.reshape(B, S, N, 1, H)

    qkv = np.concatenate([heads(q), heads(k), heads(v)], axis=3)
    np.testing.assert_allclose(_ours([qkv, None, None, bias], num_heads=N), want, rtol=1e-5)
    kv = np.concatenate([heads(k), heads(v)], axis=3).reshape(B, S, N, 2, H)
    np.testing.assert_allclose(_ours([q, kv, None, bias], num_heads=N), want, rtol=1e-5)


def test_unsupported_attribute_names_the_node():
    from onnxexec.errors import OnnxExecError

    args = [f32(B, S, D), f32(D, 3 * D), f32(3 * D)]
    model, feeds = node_model(
        "Attention", args, opset=1, domain="com.microsoft", num_heads=N, do_rotary=1
    )
    with pytest.raises(OnnxExecError, match=r"Attention.*do_rotary=1 is not supported"):
        InferenceSession(model).run(None, feeds)


def test_too_many_inputs_refused_at_session_creation():
    # onnx ships no com.microsoft schema: the plan checks arity against the handler
    from onnxexec.errors import InvalidGraphError

    x = f32(2, 8)
    model, _ = node_model("FastGelu", [x, x[0], x], opset=1, domain="com.microsoft")
    with pytest.raises(InvalidGraphError, match=r"FastGelu-1\): 3 inputs, the op takes at most 2"):
        InferenceSession(model)
