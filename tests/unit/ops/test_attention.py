"""Attention family against naive per-head / per-position numpy references
(written from the spec text) and onnxruntime where it implements the op."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import run_node, run_ort

rng = np.random.default_rng(3)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def naive_attention(q, k, v, *, allowed=None, add=None, scale=None, softcap=0.0):
    """q (B,H,T,D), k/v (B,Hkv,S,.) -> y, per (b, h) with explicit loops.

    allowed: bool (B,H,T,S) or None; add: float bias (B,H,T,S) or None.
    """
    b, h, t, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    scale = 1 / np.sqrt(d) if scale is None else scale
    y = np.zeros((b, h, t, v.shape[-1]), np.float64)
    probs = np.zeros((b, h, t, s), np.float64)
    for bi in range(b):
        for hi in range(h):
            kv = hi // (h // hkv)
            for ti in range(t):
                sc = (q[bi, hi, ti].astype(np.float64) @ k[bi, kv].T.astype(np.float64)) * scale
                if softcap > 0:
                    sc = softcap * np.tanh(sc / softcap)
                if add is not None:
                    sc = sc + add[bi, hi, ti]
                ok = np.ones(s, bool) if allowed is None else allowed[bi, hi, ti]
                if not ok.any():
                    continue  # fully masked row -> zeros
                e = np.where(ok, np.exp(sc - sc[ok].max()), 0.0)
                probs[bi, hi, ti] = e / e.sum()
                y[bi, hi, ti] = probs[bi, hi, ti] @ v[bi, kv]
    return y, probs


def causal_allowed(b, h, t, s, offset):
    """j <= i + offset[b] (bottom-right alignment)."""
    off = np.broadcast_to(np.asarray(offset), (b,))
    i = np.arange(t)[:, None]
    j = np.arange(s)[None, :]
    return np.stack([np.broadcast_to(j <= i + o, (h, t, s)) for o in off])


def test_gqa_causal_with_past_and_present():
    q, k, v = rand(2, 4, 3, 8), rand(2, 2, 3, 8), rand(2, 2, 3, 6)
    pk, pv = rand(2, 2, 5, 8), rand(2, 2, 5, 6)
    y, present_k, present_v = run_node("Attention", [q, k, v, None, pk, pv], 3, 23, is_causal=1)
    kk, vv = np.concatenate([pk, k], 2), np.concatenate([pv, v], 2)
    ref, _ = naive_attention(q, kk, vv, allowed=causal_allowed(2, 4, 3, 8, 5))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(present_k, kk)
    np.testing.assert_array_equal(present_v, vv)


def test_3d_inputs_scale_softcap_float_mask():
    q, k, v = rand(2, 3, 4 * 8), rand(2, 5, 2 * 8), rand(2, 5, 2 * 6)
    mask = rand(3, 5)
    (y,) = run_node(
        "Attention", [q, k, v, mask], 1, 23, q_num_heads=4, kv_num_heads=2, scale=0.3, softcap=2.0
    )
    q4 = q.reshape(2, 3, 4, 8).transpose(0, 2, 1, 3)
    k4 = k.reshape(2, 5, 2, 8).transpose(0, 2, 1, 3)
    v4 = v.reshape(2, 5, 2, 6).transpose(0, 2, 1, 3)
    ref, _ = naive_attention(
        q4, k4, v4, add=np.broadcast_to(mask, (2, 4, 3, 5)), scale=0.3, softcap=2.0
    )
    assert y.shape == (2, 3, 4 * 6)
    np.testing.assert_allclose(y, ref.transpose(0, 2, 1, 3).reshape(2, 3, -1), rtol=1e-5, atol=1e-6)


def test_bool_mask_fully_masked_row_is_zero_and_qk_modes():
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 4)
    mask = rng.random((1, 2, 3, 5)) > 0.3
    mask[0, 1, 2] = False  # one query row sees no key at all
    allowed = mask
    ref_y, ref_p = naive_attention(q, k, v, allowed=allowed)
    raw = np.einsum("bhtd,bhsd->bhts", q, k) / 2.0
    for mode in range(4):
        y, _, _, qk = run_node("Attention", [q, k, v, mask], 4, 24, qk_matmul_output_mode=mode)
        np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-6)
        assert not np.isnan(y).any() and np.all(y[0, 1, 2] == 0)
        if mode in (0, 1):
            np.testing.assert_allclose(qk, raw, rtol=1e-5, atol=1e-6)
        elif mode == 2:
            np.testing.assert_allclose(qk, np.where(mask, raw, -np.inf), rtol=1e-5)
        else:
            np.testing.assert_allclose(qk, ref_p, rtol=1e-5, atol=1e-6)


def test_nonpad_kv_seqlen_causal_offsets_per_batch():
    q, k, v = rand(2, 2, 2, 4), rand(2, 2, 6, 4), rand(2, 2, 6, 4)
    nonpad = np.array([6, 3], np.int64)
    (y,) = run_node("Attention", [q, k, v, None, None, None, nonpad], 1, 24, is_causal=1)
    allowed = causal_allowed(2, 2, 2, 6, nonpad - 2)
    allowed &= (np.arange(6)[None, :] < nonpad[:, None])[:, None, None, :]
    ref, _ = naive_attention(q, k, v, allowed=allowed)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("left", "right", "causal"), [(2, 1, 0), (1, -1, 1), (-1, 0, 0)])
def test_sliding_window_v25(left, right, causal):
    q, k, v = rand(1, 2, 4, 4), rand(1, 2, 6, 4), rand(1, 2, 6, 4)
    (y,) = run_node(
        "Attention",
        [q, k, v],
        1,
        25,
        is_causal=causal,
        left_window_size=left,
        right_window_size=right,
    )
    diff = np.arange(4)[:, None] - np.arange(6)[None, :]  # query pos - key pos
    ok = np.ones((4, 6), bool)
    if left >= 0:
        ok &= diff <= left
    if right >= 0:
        ok &= -diff <= right
    if causal:
        ok &= diff >= 0
    ref, _ = naive_attention(q, k, v, allowed=np.broadcast_to(ok, (1, 2, 4, 6)))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_matches_onnxruntime_and_keeps_fp16():
    q, k, v = rand(2, 4, 3, 8), rand(2, 2, 5, 8), rand(2, 2, 5, 6)
    mask = rng.random((3, 5)) > 0.2
    got = run_node("Attention", [q, k, v, mask], 1, 23)
    ref = run_ort("Attention", [q, k, v, mask], 1, 23)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)
    (y16,) = run_node(
        "Attention",
        [q.astype(np.float16), k.astype(np.float16), v.astype(np.float16)],
        1,
        23,
        is_causal=1,
    )
    ref16, _ = naive_attention(q, k, v, allowed=causal_allowed(2, 4, 3, 5, 0))
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16, ref16, rtol=1e-2, atol=1e-2)


def naive_rope(x, cos, sin, interleaved, rot):
    """x (B, H, T, D); cos/sin (B, T, rot/2); rotate pairs as complex numbers."""
    out = x.astype(np.float64).copy()
    half = rot // 2
    for i in range(half):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
        c, s = cos[:, None, :, i], sin[:, None, :, i]
        out[..., a] = c * x[..., a] - s * x[..., b]
        out[..., b] = s * x[..., a] + c * x[..., b]
    return out


@pytest.mark.parametrize(("interleaved", "rot"), [(0, 0), (1, 0), (0, 4), (1, 4)])
def test_rotary_embedding_with_position_ids(interleaved, rot):
    x = rand(2, 3, 5, 8)
    cache_len, half = 10, (rot or 8) // 2
    cos_cache, sin_cache = rand(cache_len, half), rand(cache_len, half)
    pos = rng.integers(0, cache_len, (2, 5))
    (y,) = run_node(
        "RotaryEmbedding",
        [x, cos_cache, sin_cache, pos],
        1,
        23,
        interleaved=interleaved,
        rotary_embedding_dim=rot,
    )
    ref = naive_rope(x, cos_cache[pos], sin_cache[pos], interleaved, rot or 8)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    ort = run_ort(
        "RotaryEmbedding",
        [x, cos_cache, sin_cache, pos],
        1,
        23,
        interleaved=interleaved,
        rotary_embedding_dim=rot,
    )
    np.testing.assert_allclose(y, ort[0], rtol=1e-5, atol=1e-6)


def test_rotary_embedding_3d_input_without_position_ids():
    x = rand(2, 5, 3 * 8)
    cos, sin = rand(2, 5, 4), rand(2, 5, 4)
    (y,) = run_node("RotaryEmbedding", [x, cos, sin], 1, 23, num_heads=3)
    x4 = x.reshape(2, 5, 3, 8).transpose(0, 2, 1, 3)
    ref = naive_rope(x4, cos, sin, 0, 8).transpose(0, 2, 1, 3).reshape(2, 5, 24)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_flex_attention_score_and_prob_mods():
    f = TensorProto.FLOAT
    score_mod = helper.make_graph(
        [helper.make_node("Add", ["s", "bias"], ["s_out"])],
        "score_mod",
        [helper.make_tensor_value_info("s", f, None)],
        [helper.make_tensor_value_info("s_out", f, None)],
        [helper.make_tensor("bias", f, [], [0.5])],
    )
    prob_mod = helper.make_graph(
        [helper.make_node("Mul", ["p", "two"], ["p_out"])],
        "prob_mod",
        [helper.make_tensor_value_info("p", f, None)],
        [helper.make_tensor_value_info("p_out", f, None)],
        [helper.make_tensor("two", f, [], [2.0])],
    )
    q, k, v = rand(1, 4, 3, 8), rand(1, 2, 5, 8), rand(1, 2, 5, 6)
    node = helper.make_node(
        "FlexAttention",
        ["q", "k", "v"],
        ["y"],
        domain="ai.onnx.preview",
        score_mod=score_mod,
        prob_mod=prob_mod,
        scale=0.25,
    )
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, f, a.shape)
            for n, a in zip("qkv", (q, k, v), strict=True)
        ],
        [helper.make_tensor_value_info("y", f, None)],
    )
    model = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("ai.onnx.preview", 1)]
    )
    model.ir_version = 10
    (y,) = InferenceSession(model).run(None, {"q": q, "k": k, "v": v})
    # A constant added to every score cancels in softmax; prob_mod doubles the output.
    ref, _ = naive_attention(q, k, v, scale=0.25)
    np.testing.assert_allclose(y, 2 * ref, rtol=1e-5, atol=1e-6)


def naive_linear_attention(q, k, v, hq, hkv, decay=None, beta=None, state=None):
    """Per token, per kv head, written from the spec's update equations."""
    b, t, _ = q.shape
    dk, dv = q.shape[-1] // hq, v.shape[-1] // hkv
    qh = q.reshape(b, t, hq, dk).astype(np.float64)
    kh = k.reshape(b, t, hkv, dk).astype(np.float64)
    vh = v.reshape(b, t, hkv, dv).astype(np.float64)
    s = np.zeros((b, hkv, dk, dv)) if state is None else state.astype(np.float64).copy()
    out = np.zeros((b, t, hq, dv))
    for bi in range(b):
        for ti in range(t):
            for h in range(hkv):
                if decay is not None:
                    s[bi, h] *= np.exp(decay[bi, ti, h])
                vt = vh[bi, ti, h]
                if beta is not None:
                    vt = beta[bi, ti, h] * (vt - s[bi, h].T @ kh[bi, ti, h])
                s[bi, h] += np.outer(kh[bi, ti, h], vt)
            for h in range(hq):
                out[bi, ti, h] = qh[bi, ti, h] @ s[bi, h // (hq // hkv)] / np.sqrt(dk)
    return out.reshape(b, t, hq * dv), s


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention_rules_gqa(rule):
    hq, hkv, dk, dv = 4, 2, 3, 5
    q, k, v = rand(2, 4, hq * dk), rand(2, 4, hkv * dk), rand(2, 4, hkv * dv)
    past = rand(2, hkv, dk, dv)
    decay = -rng.random((2, 4, hkv)).astype(np.float32) if "gated" in rule else None
    beta = rng.random((2, 4, hkv)).astype(np.float32) if "delta" in rule else None
    y, state = run_node(
        "LinearAttention",
        [q, k, v, past, decay, beta],
        2,
        27,
        q_num_heads=hq,
        kv_num_heads=hkv,
        update_rule=rule,
    )
    ref_y, ref_s = naive_linear_attention(q, k, v, hq, hkv, decay, beta, past)
    np.testing.assert_allclose(y, ref_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state, ref_s, rtol=1e-4, atol=1e-5)
    assert y.dtype == np.float32 and state.dtype == np.float32
