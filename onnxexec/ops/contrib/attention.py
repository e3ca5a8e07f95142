"""com.microsoft Attention (fused self-attention with packed QKV weights)
and MultiHeadAttention (separate or packed Q, K, V), as onnxruntime's CPU kernels
compute them (docs/ContribOperators.md; contrib_ops/cpu/bert/attention_cpu_base.h).

Masks are additive as there: a masked key gets `mask_filter_value` (-10000 by default)
added to its score instead of -inf, so a row whose keys are all masked averages them."""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.registry import op

_FILTER = -10000.0


def _softmax_attend(q, k, v, scale, add):
    """q (B, N, S, H), k (B, N, T, H), v (B, N, T, Hv), add broadcast to (B, N, S, T).

    fp16 runs in float32 as onnxruntime's CPU kernels do."""
    if q.dtype == np.float16:
        q, k, v = (a.astype(np.float32) for a in (q, k, v))
    s = np.matmul(q, k.swapaxes(-1, -2))
    s *= s.dtype.type(scale)
    if add is not None:
        s += add.astype(s.dtype, copy=False)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v)


def _key_mask(mask, b, s, t, past, fill):
    """An additive (B, 1, S|1, T) float32 mask from a mask_index / key_padding_mask.

    (B,): keys at or after mask[b] are padding; (2B,): also those before mask[B + b];
    (B, T) / (B, S, T): 0 marks padding (raw masks)."""
    if mask is None:
        return None
    j = np.arange(t)
    if mask.ndim == 1 and mask.shape[0] in (b, 2 * b):
        keep = j[None, :] < mask[:b, None]
        if mask.shape[0] == 2 * b:
            keep &= j[None, :] >= mask[b:, None]
        keep = keep[:, None, None, :]
    elif mask.ndim == 2 and mask.shape == (b, t):
        keep = (mask != 0)[:, None, None, :]
    elif mask.ndim == 3 and mask.shape == (b, s, t):
        keep = (mask != 0)[:, None, :, :]
    else:
        raise ValueError(
            f"mask of shape {list(mask.shape)} is none of (B,), (2B,), (B, T), (B, S, T) "
            f"with B={b}, S={s}, T={t} (past {past})"
        )
    return np.where(keep, np.float32(0), np.float32(fill))


def _causal(s, t, fill):
    """(S, T): query i (at position t - s + i) sees keys up to its own position."""
    return np.where(
        np.arange(t)[None, :] > np.arange(s)[:, None] + (t - s), np.float32(fill), np.float32(0)
    )


def _heads(x, n):
    """(B, S, N*H) -> (B, N, S, H)."""
    b, s, d = x.shape
    return x.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)


def _merge(o):
    """(B, N, S, H) -> (B, S, N*H)."""
    b, n, s, h = o.shape
    return o.transpose(0, 2, 1, 3).reshape(b, s, n * h)


def _additive(parts):
    add = None
    for p in parts:
        if p is not None:
            add = p if add is None else add + p
    return add


@op("Attention", 1, domain=MS_DOMAIN, wants=("outputs_used",))
def attention(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray | None = None,
    mask_index: np.ndarray | None = None,
    past: np.ndarray | None = None,
    attention_bias: np.ndarray | None = None,
    past_sequence_length: np.ndarray | None = None,
    *,
    num_heads: int,
    qkv_hidden_sizes: tuple[int, ...] = (),
    scale: float = 0.0,
    unidirectional: int = 0,
    mask_filter_value: float = _FILTER,
    do_rotary: int = 0,
    rotary_embedding_dim: int = 0,
    past_present_share_buffer: int = 0,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple[np.ndarray, np.ndarray | None]:
    """input (B, S, Din) @ weights (Din, Dq+Dk+Dv) + bias -> Q, K, V in N heads;
    output (B, S, Dv), present (2, B, N, P+S, H) = past's keys / values then these.

    scale 0 means 1/sqrt(H); unidirectional masks future keys; attention_bias
    (B|1, N|1, S, T) is added to the scores."""
    if do_rotary or past_present_share_buffer:
        which = "do_rotary" if do_rotary else "past_present_share_buffer"
        raise NotImplementedError(f"com.microsoft Attention: {which}=1 is not supported")
    b, s, _ = x.shape
    dq, dk, dv = qkv_hidden_sizes or (weights.shape[1] // 3,) * 3
    if dq != dk or dq + dk + dv != weights.shape[1] or dq % num_heads or dv % num_heads:
        raise ValueError(
            f"com.microsoft Attention: qkv_hidden_sizes {[dq, dk, dv]} do not fit weights "
            f"{list(weights.shape)} and num_heads {num_heads}"
        )
    qkv = np.matmul(x, weights)
    if bias is not None:
        qkv += bias
    q = _heads(qkv[..., :dq], num_heads)
    k = _heads(qkv[..., dq : dq + dk], num_heads)
    v = _heads(qkv[..., dq + dk :], num_heads)
    p = 0
    if past is not None:
        p = past.shape[3]
        k = np.concatenate([past[0], k], axis=2)
        v = np.concatenate([past[1], v], axis=2)
    t = p + s
    add = _additive(
        (
            _key_mask(mask_index, b, s, t, p, mask_filter_value),
            _causal(s, t, mask_filter_value) if unidirectional else None,
            attention_bias,
        )
    )
    sc = scale or 1.0 / np.sqrt(dq // num_heads)
    out = _merge(_softmax_attend(q, k, v, sc, add)).astype(x.dtype, copy=False)
    want_present = len(outputs_used) > 1 and outputs_used[1] and dk == dv
    present = np.stack([k, v]) if want_present else None
    return out, present


def _split_mha(query, key, value, bias, n):
    """Q (B, N, S, H), K and V (B, N, L, H) from MultiHeadAttention's input layouts, and
    whether K / V came in as (B, N, L, H) (a cross-attention cache: no bias, no past)."""
    if key is None:  # packed QKV: query (B, S, N, 3, H)
        qkv = query.transpose(3, 0, 2, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if bias is not None:
            h = q.shape[-1]
            q, k, v = (
                a + bias[i * n * h : (i + 1) * n * h].reshape(n, 1, h)
                for i, a in enumerate((q, k, v))
            )
        return q, k, v, False
    d = query.shape[-1]
    q = query if bias is None else query + bias[:d]
    q = _heads(q, n)
    if value is None:  # packed KV: key (B, L, N, 2, H)
        kv = key.transpose(3, 0, 2, 1, 4)
        k, v = kv[0], kv[1]
        if bias is not None:
            h = k.shape[-1]
            k = k + bias[d : d + n * h].reshape(n, 1, h)
            v = v + bias[d + n * h :].reshape(n, 1, h)
        return q, k, v, False
    if key.ndim == 4:
        return q, key, value, True
    dk = key.shape[-1]
    if bias is not None:
        key = key + bias[d : d + dk]
        value = value + bias[d + dk :]
    return q, _heads(key, n), _heads(value, n), False


@op("MultiHeadAttention", 1, domain=MS_DOMAIN, wants=("outputs_used",))
def multi_head_attention(
    query: np.ndarray,
    key: np.ndarray | None = None,
    value: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    key_padding_mask: np.ndarray | None = None,
    attention_bias: np.ndarray | None = None,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    past_sequence_length: np.ndarray | None = None,
    cache_indirection: np.ndarray | None = None,
    *,
    num_heads: int,
    scale: float = 0.0,
    unidirectional: int = 0,
    mask_filter_value: float = _FILTER,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """query (B, S, D); key / value (B, L, D) or (B, N, L, H), or packed in query
    (B, S, N, 3, H) or key (B, L, N, 2, H); bias (D + Dk + Dv) added to 3-D Q, K, V.

    Outputs (output (B, S, Dv), present_key / present_value (B, N, P+L, H) = past then
    these keys / values, qk: unsupported)."""
    if cache_indirection is not None:
        raise NotImplementedError(
            "MultiHeadAttention: cache_indirection (beam search) is not supported"
        )
    if len(outputs_used) > 3 and outputs_used[3]:
        raise NotImplementedError("MultiHeadAttention: the qk output is not supported")
    q, k, v, cross = _split_mha(query, key, value, bias, num_heads)
    if past_key is not None and not cross:
        k = np.concatenate([past_key, k], axis=2)
        v = np.concatenate([past_value, v], axis=2)
    b, _, s, h = q.shape
    t = k.shape[2]
    add = _additive(
        (
            _key_mask(key_padding_mask, b, s, t, t - s, mask_filter_value),
            _causal(s, t, mask_filter_value) if unidirectional else None,
            attention_bias,
        )
    )
    out = _merge(_softmax_attend(q, k, v, scale or 1.0 / np.sqrt(h), add))
    return out.astype(query.dtype, copy=False), k, v, None
