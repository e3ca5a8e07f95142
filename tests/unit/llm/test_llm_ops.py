"""onnxexec-domain LLM ops vs numpy references written from their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxexec.ops.llm import (
    gated_act,
    kv_attention_op,
    last_row,
    q_embedding,
    q_matmul,
    rms_norm,
    rope,
    softcap,
)

RNG = np.random.default_rng(7)


def rope_reference(x, p0, head_dim, n_dims, base, freq_scale, style):
    """Rotate each head's dimension pairs by angle (p * freq_scale) * base^(-2i/n_dims):
    'norm' pairs (2i, 2i+1), 'neox' pairs (i, i + n_dims/2); float64, one row at a time."""
    T = x.shape[0]
    out = x.astype(np.float64).reshape(T, -1, head_dim).copy()
    src = out.copy()
    for t in range(T):
        for i in range(n_dims // 2):
            theta = (p0 + t) * freq_scale * base ** (-2.0 * i / n_dims)
            a, b = (2 * i, 2 * i + 1) if style == "norm" else (i, i + n_dims // 2)
            c, s = math.cos(theta), math.sin(theta)
            out[t, :, a] = src[t, :, a] * c - src[t, :, b] * s
            out[t, :, b] = src[t, :, a] * s + src[t, :, b] * c
    return out.reshape(x.shape)


@pytest.mark.parametrize("style", ["norm", "neox"])
@pytest.mark.parametrize(
    ("p0", "n_dims", "base", "freq_scale"),
    [(0, 16, 10000.0, 1.0), (37, 16, 1e6, 1.0), (5, 8, 500.0, 0.25)],
)
def test_rope_matches_definition(style, p0, n_dims, base, freq_scale):
    x = RNG.standard_normal((6, 3 * 16)).astype(np.float32)
    got = rope(
        x, np.asarray(p0), head_dim=16, n_dims=n_dims, base=base, freq_scale=freq_scale, style=style
    )
    ref = rope_reference(x, p0, 16, n_dims, base, freq_scale, style)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-5)
    if n_dims < 16:  # dims past n_dims pass through untouched
        np.testing.assert_array_equal(
            got.reshape(6, 3, 16)[..., n_dims:], x.reshape(6, 3, 16)[..., n_dims:]
        )


def test_rope_position_zero_is_identity_and_styles_differ():
    x = RNG.standard_normal((1, 32)).astype(np.float32)
    np.testing.assert_array_equal(rope(x, np.asarray(0), head_dim=32), x)
    y = RNG.standard_normal((2, 32)).astype(np.float32)
    a = rope(y, np.asarray(3), head_dim=32, style="norm")
    b = rope(y, np.asarray(3), head_dim=32, style="neox")
    assert not np.allclose(a, b)
    with pytest.raises(ValueError, match="RoPE style"):
        rope(y, np.asarray(0), head_dim=32, style="gptj")


@pytest.mark.parametrize("group", [0, 8])
def test_rms_norm(group):
    x = (3 * RNG.standard_normal((4, 32))).astype(np.float32)
    w = RNG.standard_normal(group or 32).astype(np.float32)
    got = rms_norm(x, w, epsilon=1e-6, group=group)
    xs = x.astype(np.float64).reshape(4, -1, group or 32)
    ref = (xs / np.sqrt((xs**2).mean(-1, keepdims=True) + 1e-6) * w).reshape(4, 32)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_swiglu_and_exact_geglu():
    g = RNG.standard_normal((3, 16)).astype(np.float32) * 4
    u = RNG.standard_normal((3, 16)).astype(np.float32)
    gd = g.astype(np.float64)
    np.testing.assert_allclose(
        gated_act(g, u, act="silu"), gd / (1 + np.exp(-gd)) * u, rtol=1e-6, atol=1e-6
    )
    gelu = 0.5 * gd * (1 + np.tanh(math.sqrt(2 / math.pi) * (gd + 0.044715 * gd**3)))
    np.testing.assert_allclose(gated_act(g, u, act="gelu_tanh"), gelu * u, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="gated activation"):
        gated_act(g, u, act="relu")


def test_geglu_f16_table_as_ggml():
    """GGML_GELU_FP16: gelu of the half-rounded input, rounded to half; 0 at <= -10,
    identity at >= 10."""
    g = np.array(
        [[-12.0, -10.0, -3.3, -0.1, 0.0, 0.123456, 1.0, 2.5, 9.99, 10.0, 15.0]], np.float32
    )
    u = np.ones_like(g)
    got = gated_act(g, u, act="gelu_tanh_f16")
    h = g.astype(np.float16).astype(np.float64)
    exact = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    ref = exact.astype(np.float16).astype(np.float32)
    ref[0, :2] = 0.0
    ref[0, -2:] = g[0, -2:]
    np.testing.assert_array_equal(got, ref)


def test_softcap_last_row_embedding_matmul():
    x = np.array([[-100.0, 0.0, 3.0]], np.float32)
    np.testing.assert_allclose(softcap(x, cap=30.0), 30 * np.tanh(x / 30), rtol=1e-6)
    y = RNG.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_array_equal(last_row(y), y[4:5])
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    np.testing.assert_allclose(
        q_embedding(np.array([3, 0, 3]), table, scale=2.0), table[[3, 0, 3]] * 2
    )
    with pytest.raises(ValueError, match="out of range"):
        q_embedding(np.array([10]), table)
    w = RNG.standard_normal((6, 4)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    np.testing.assert_allclose(q_matmul(y, w, b), y @ w.T + b, rtol=1e-5, atol=1e-6)


def test_kv_attention_writes_cache_in_place():
    T, Hkv, Dh, C = 3, 2, 8, 10
    q = RNG.standard_normal((T, 4 * Dh)).astype(np.float32)
    k = RNG.standard_normal((T, Hkv * Dh)).astype(np.float32)
    v = RNG.standard_normal((T, Hkv * Dh)).astype(np.float32)
    kc = np.zeros((C, Hkv, Dh), np.float32)
    vc = np.zeros((C, Hkv, Dh), np.float32)
    out = kv_attention_op(q, k, v, kc, vc, np.asarray(2), head_dim=Dh)
    np.testing.assert_array_equal(kc[2:5], k.reshape(T, Hkv, Dh))
    np.testing.assert_array_equal(vc[2:5], v.reshape(T, Hkv, Dh))
    assert not kc[5:].any() and out.shape == q.shape
    kv_attention_op(q, k, v, kc, vc, np.asarray(2), head_dim=Dh, kv_f16=1)
    np.testing.assert_array_equal(kc[2:5], k.reshape(T, Hkv, Dh).astype(np.float16))
    # q_scale multiplies q before the dot product: same as scaling the scores
    a = kv_attention_op(q, k, v, kc, vc, np.asarray(0), head_dim=Dh, scale=1.0, q_scale=0.3)
    b = kv_attention_op(q, k, v, kc, vc, np.asarray(0), head_dim=Dh, scale=0.3)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
