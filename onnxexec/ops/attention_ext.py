"""RotaryEmbedding (opset 23), FlexAttention (ai.onnx.preview 1) and
LinearAttention: the attention relatives. Shape letters as in attention.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.graph import Graph
from onnxexec.ops.attention import grouped_matmul, softmax_rows
from onnxexec.ops.registry import op

PREVIEW_DOMAIN = "ai.onnx.preview"


@op("RotaryEmbedding", since=23)
def rotary_embedding(
    x: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    position_ids: np.ndarray | None = None,
    *,
    interleaved: int = 0,
    num_heads: int = 0,
    rotary_embedding_dim: int = 0,
) -> np.ndarray:
    """Rotate the first rotary_embedding_dim (default: all) channels of each head.

    x (B, H, T, Dh) or (B, T, H*Dh) with num_heads; caches (P, R/2) indexed by
    position_ids (B, T), or already (B, T, R/2). Pairs are (i, i + R/2), or
    (2i, 2i + 1) when interleaved.
    """
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]  # (B, T, R/2)
    if x.ndim == 4:
        xh = x  # (B, H, T, Dh)
        cos, sin = cos_cache[:, None], sin_cache[:, None]  # (B, 1, T, R/2)
    else:
        if not num_heads:
            raise ValueError("RotaryEmbedding: 3-D input needs the num_heads attribute")
        b, t, hidden = x.shape
        xh = x.reshape(b, t, num_heads, hidden // num_heads)  # (B, T, H, Dh)
        cos, sin = cos_cache[:, :, None], sin_cache[:, :, None]  # (B, T, 1, R/2)
    rot = rotary_embedding_dim or xh.shape[-1]
    if cos.shape[-1] != rot // 2 or sin.shape[-1] != rot // 2:
        raise ValueError(
            f"RotaryEmbedding: caches have {cos.shape[-1]} columns, expected {rot // 2}"
        )
    if interleaved:
        x1, x2 = xh[..., 0:rot:2], xh[..., 1:rot:2]
    else:
        x1, x2 = xh[..., : rot // 2], xh[..., rot // 2 : rot]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    out = xh.copy()
    if interleaved:
        out[..., 0:rot:2], out[..., 1:rot:2] = real, imag
    else:
        out[..., : rot // 2], out[..., rot // 2 : rot] = real, imag
    return out.reshape(x.shape)


@op("FlexAttention", since=1, domain=PREVIEW_DOMAIN, wants=("run_graph",))
def flex_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    prob_mod: Graph | None = None,
    scale: float | None = None,
    score_mod: Graph | None = None,
    softmax_precision: int | None = None,
    run_graph: Callable[..., list[Any]],
) -> np.ndarray:
    """softmax(score_mod(scale * Q K^T)) -> prob_mod -> @ V, all heads batched.

    Q (B, H, T, Dh), K (B, Hkv, S, Dh), V (B, Hkv, S, Dv) -> (B, H, T, Dv). Scores
    and probabilities are in softmax_precision (default float32, or float64 for
    double inputs); the mod subgraphs see (B, H, T, S) tensors of that type.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("FlexAttention: Q, K and V must be rank 4")
    dtype = q.dtype
    h, dh, hkv = q.shape[1], q.shape[3], k.shape[1]
    if h % hkv:
        raise ValueError(f"FlexAttention: {h} query heads is not a multiple of {hkv}")
    if softmax_precision is not None:
        work = np_dtype(softmax_precision)
    else:
        work = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    scale = 1.0 / np.sqrt(dh) if scale is None else scale
    root = dtype.type(np.sqrt(np.float32(scale)))  # Q and K each scaled by sqrt(scale)
    kt = (k * root).swapaxes(-1, -2)  # (B, Hkv, Dh, S)
    scores = grouped_matmul(q * root, kt, dtype).astype(work)  # (B, H, T, S)
    if score_mod is not None:
        scores = np.asarray(run_graph(score_mod, scores)[0], work)
    probs = softmax_rows(scores, inplace=score_mod is None)
    if prob_mod is not None:
        probs = np.asarray(run_graph(prob_mod, probs)[0], work)
    y = grouped_matmul(probs, v.astype(work), work)
    return y.astype(v.dtype)


def _heads(x: np.ndarray, n: int) -> np.ndarray:
    """(B, T, n*D) -> (B, n, T, D) float32."""
    b, t, hd = x.shape
    if hd % n:
        raise ValueError(f"LinearAttention: last dim {hd} is not divisible by {n} heads")
    return x.reshape(b, t, n, hd // n).transpose(0, 2, 1, 3).astype(np.float32)


@op("LinearAttention", since=27)
def linear_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    past_state: np.ndarray | None = None,
    decay: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    *,
    chunk_size: int = 64,
    kv_num_heads: int,
    q_num_heads: int,
    scale: float = 0.0,
    update_rule: str = "gated_delta",
) -> tuple[np.ndarray, np.ndarray]:
    """Recurrent linear attention with state S (B, Hkv, Dk, Dv), float32 inside:

    gated:  S = exp(g_t) * S;   delta:  v_t = beta_t * (v_t - S^T k_t);
    always: S += k_t (x) v_t;   o_t = scale * q_t^T S (query heads share kv heads).
    query/key (B, T, H*Dk), value (B, T, Hkv*Dv) -> output (B, T, H*Dv), present_state.
    chunk_size is a tuning hint only.
    """
    if update_rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ValueError(f"LinearAttention: unknown update_rule '{update_rule}'")
    gating = update_rule in ("gated", "gated_delta")
    delta = update_rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise ValueError(
            f"LinearAttention: update_rule '{update_rule}' and the given decay/beta inputs disagree"
        )
    if q_num_heads % kv_num_heads:
        raise ValueError("LinearAttention: q_num_heads must be a multiple of kv_num_heads")
    b, t_len, _ = query.shape
    group = q_num_heads // kv_num_heads
    q4 = _heads(query, q_num_heads)  # (B, H, T, Dk)
    k4 = _heads(key, kv_num_heads)  # (B, Hkv, T, Dk)
    v4 = _heads(value, kv_num_heads)  # (B, Hkv, T, Dv)
    dk, dv = q4.shape[-1], v4.shape[-1]
    q5 = q4.reshape(b, kv_num_heads, group, t_len, dk)
    if decay is not None:
        if decay.shape[-1] == kv_num_heads:  # per-head scalar decay
            g4 = decay.reshape(b, t_len, kv_num_heads, 1).transpose(0, 2, 1, 3)
        else:  # per key-dimension decay
            g4 = _heads(decay, kv_num_heads)
        gate = np.exp(g4.astype(np.float32))  # (B, Hkv, T, 1 or Dk)
    if beta is not None:
        n = beta.shape[-1]
        beta4 = beta.reshape(b, t_len, n, 1).transpose(0, 2, 1, 3).astype(np.float32)
    if past_state is not None:
        state = past_state.astype(np.float32)  # (B, Hkv, Dk, Dv), a fresh copy
        state_dtype = past_state.dtype
    else:
        state = np.zeros((b, kv_num_heads, dk, dv), np.float32)
        state_dtype = query.dtype
    scale_val = np.float32(scale if scale else 1.0 / np.sqrt(dk))
    out = np.empty((b, kv_num_heads, group, t_len, dv), np.float32)
    for i in range(t_len):
        k_t, v_t = k4[:, :, i], v4[:, :, i]  # (B, Hkv, Dk), (B, Hkv, Dv)
        if gating:
            state = state * gate[:, :, i, :, None]
        if delta:
            retrieved = np.matmul(k_t[:, :, None, :], state)[:, :, 0]  # S^T k: (B, Hkv, Dv)
            v_t = beta4[:, :, i] * (v_t - retrieved)
        state = state + k_t[..., :, None] * v_t[..., None, :]
        out[:, :, :, i] = scale_val * np.matmul(q5[:, :, :, i], state)  # (B, Hkv, G, Dv)
    output = out.reshape(b, q_num_heads, t_len, dv).transpose(0, 2, 1, 3)
    return (
        output.reshape(b, t_len, q_num_heads * dv).astype(query.dtype),
        state.astype(state_dtype),
    )
