"""Attention (opsets 23-25): scaled dot-product attention over all heads at once.

Shapes: B batch, H query heads, Hkv key/value heads (GQA when H > Hkv), T query
length, S total key length (past + new), Dh query/key head size, Dv value head size.
Everything is batched np.matmul over (B, Hkv, H/Hkv) — no loops over heads or
positions, and K/V are never repeated per query head.

float32/float64 fold the whole scale into Q; lower-precision types follow the
spec's graph literally (Q and K each times sqrt(scale), every step rounded to the
input type) so results match the reference bit for bit where it matters.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ops.registry import op


def _to_heads(x: np.ndarray, n_heads: int | None, what: str) -> np.ndarray:
    """(B, S, n*D) -> (B, n, S, D); 4-D inputs pass through."""
    if x.ndim == 4:
        return x
    if x.ndim != 3 or not n_heads:
        raise ValueError(f"Attention: 3-D {what} needs q_num_heads/kv_num_heads, got {x.shape}")
    b, s, hidden = x.shape
    return x.reshape(b, s, n_heads, hidden // n_heads).transpose(0, 2, 1, 3)


def _neg_inf_where(allowed: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Additive bias: 0 where allowed, -inf elsewhere (select, never 0 * -inf)."""
    return np.where(allowed, dtype.type(0), dtype.type(-np.inf))


def _frontier(t_len: int, s_len: int, offset: int | np.ndarray) -> np.ndarray:
    """diff[..., i, j] = (i + offset) - j: query i's absolute position minus key j.

    A scalar offset gives (T, S); a per-batch offset (B,) gives (B, 1, T, S).
    """
    i = np.arange(t_len).reshape(t_len, 1)
    j = np.arange(s_len).reshape(1, s_len)
    if np.ndim(offset):
        return (i + np.reshape(offset, (-1, 1, 1)) - j)[:, None]
    return i + int(offset) - j


def attention_bias(
    attn_mask: np.ndarray | None,
    t_len: int,
    s_len: int,
    dtype: np.dtype,
    *,
    is_causal: int,
    offset: int | np.ndarray,
    nonpad_kv_seqlen: np.ndarray | None,
    left_window_size: int,
    right_window_size: int,
) -> np.ndarray:
    """Additive bias broadcastable to (B, H, T, S): mask + causal + window + padding.

    `offset` is the number of valid keys before the query block: past length for an
    internal cache, nonpad_kv_seqlen - T per batch for an external one, else 0.
    """
    bias = np.zeros((t_len, s_len), dtype)
    if attn_mask is not None:
        pad = s_len - attn_mask.shape[-1]
        if pad > 0:  # a short mask's missing keys are disallowed
            fill = False if attn_mask.dtype == np.bool_ else -np.inf
            widths = [(0, 0)] * (attn_mask.ndim - 1) + [(0, pad)]
            attn_mask = np.pad(attn_mask, widths, constant_values=fill)
        if attn_mask.dtype == np.bool_:
            bias = bias + _neg_inf_where(attn_mask, dtype)
        else:
            bias = bias + attn_mask.astype(dtype, copy=False)
    if is_causal:
        bias = bias + _neg_inf_where(_frontier(t_len, s_len, offset) >= 0, dtype)
    if left_window_size >= 0 or right_window_size >= 0:
        diff = _frontier(t_len, s_len, offset)
        allowed = np.ones(diff.shape, np.bool_)
        if left_window_size >= 0:
            allowed &= diff <= left_window_size
        if right_window_size >= 0:
            allowed &= -diff <= right_window_size
        bias = bias + _neg_inf_where(allowed, dtype)
    if nonpad_kv_seqlen is not None:
        valid = np.arange(s_len) < np.asarray(nonpad_kv_seqlen).reshape(-1, 1)  # (B, S)
        bias = bias + _neg_inf_where(valid, dtype)[:, None, None, :]
    return bias


def softmax_rows(x: np.ndarray, *, inplace: bool = False) -> np.ndarray:
    """Stable softmax over the last axis; an all -inf row gives zeros, not NaN."""
    if x.shape[-1] == 0:  # no keys: nothing to normalise (max would have no identity)
        return x if inplace else x.copy()
    x_max = np.max(x, axis=-1, keepdims=True)
    if np.isneginf(x_max).any():
        x_max = np.where(np.isneginf(x_max), x.dtype.type(0), x_max)
    e = np.subtract(x, x_max, out=x if inplace else None)
    np.exp(e, out=e)
    s = np.sum(e, axis=-1, keepdims=True)
    if (s == 0).any():
        s = np.where(s == 0, x.dtype.type(1), s)
    return np.divide(e, s, out=e)


def grouped_matmul(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """(B, H, T, X) @ (B, Hkv, X, Y) -> (B, H, T, Y); query head h uses kv head h // (H/Hkv).

    Heads of one group are adjacent, so A is viewed as (B, Hkv, group*T, X): one
    plain batched GEMM per kv head (a broadcast 5-D matmul would leave BLAS).
    Half types multiply in float32 and round the result to `dtype`, as numpy does.
    """
    bsz, h, t_len, x_dim = a.shape
    hkv = b.shape[1]
    a = a.reshape(bsz, hkv, (h // hkv) * t_len, x_dim)
    if dtype.itemsize < 4:
        out = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    else:
        out = np.matmul(a, b)
    return out.reshape(bsz, h, t_len, b.shape[-1])


def _add_into(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y, written into x when the broadcast result has x's shape."""
    if np.broadcast_shapes(x.shape, y.shape) == x.shape:
        return np.add(x, y, out=x)
    return x + y


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    attn_mask: np.ndarray | None = None,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    nonpad_kv_seqlen: np.ndarray | None = None,
    *,
    is_causal: int = 0,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
    left_window_size: int = -1,
    right_window_size: int = -1,
    outputs_used: tuple[bool, ...] = (True, True, True, True),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Y, present_key, present_value, qk_matmul_output (see module docstring)."""
    if (past_key is None) != (past_value is None):
        raise ValueError("Attention: past_key and past_value must be given together")
    is_3d = q.ndim == 3
    dtype = q.dtype
    q = _to_heads(q, q_num_heads, "Q")  # (B, H, T, Dh)
    k = _to_heads(k, kv_num_heads, "K")  # (B, Hkv, S_new, Dh)
    v = _to_heads(v, kv_num_heads, "V")  # (B, Hkv, S_new, Dv)
    if past_key is not None:
        k = np.concatenate((past_key, k), axis=2)  # (B, Hkv, S, Dh)
        v = np.concatenate((past_value, v), axis=2)  # (B, Hkv, S, Dv)
    b, h, t_len, dh = q.shape
    hkv, s_len = k.shape[1], k.shape[2]
    if h % hkv:
        raise ValueError(f"Attention: {h} query heads is not a multiple of {hkv} kv heads")
    keep = qk_matmul_output_mode if len(outputs_used) > 3 and outputs_used[3] else None

    scale = 1 / np.sqrt(dh) if scale is None else scale
    if dtype.itemsize >= 4:
        qs, kt = q * dtype.type(scale), k.swapaxes(-1, -2)
    else:
        root = dtype.type(np.sqrt(scale))
        qs, kt = q * root, k.swapaxes(-1, -2) * root
    qk = grouped_matmul(qs, kt, dtype)  # (B, H, T, S), a fresh array we may overwrite
    saved = qk.copy() if keep == 0 else None
    if softcap > 0:
        cap = dtype.type(softcap)
        np.tanh(np.divide(qk, cap, out=qk), out=qk)
        qk *= cap
    if keep == 1:
        saved = qk.copy()

    if past_key is not None:
        offset: int | np.ndarray = past_key.shape[2]
    elif nonpad_kv_seqlen is not None:
        offset = np.asarray(nonpad_kv_seqlen).reshape(-1).astype(np.int64) - t_len
    else:
        offset = 0
    bias = attention_bias(
        attn_mask,
        t_len,
        s_len,
        dtype,
        is_causal=is_causal,
        offset=offset,
        nonpad_kv_seqlen=nonpad_kv_seqlen,
        left_window_size=left_window_size,
        right_window_size=right_window_size,
    )
    scores = _add_into(qk, bias)
    if keep == 2:
        saved = scores.copy()
    soft_dtype = dtype if softmax_precision is None else np_dtype(softmax_precision)
    probs = softmax_rows(scores.astype(soft_dtype, copy=False), inplace=True)
    # Rows whose bias forbids every key give 0, decided on the bias (not on the
    # scores, which may be NaN from inf + -inf).
    dead = np.isneginf(np.max(bias, axis=-1, keepdims=True)) if s_len else np.False_
    if dead.any():
        probs = np.where(dead, soft_dtype.type(0), probs)
    probs = probs.astype(dtype, copy=False)
    if keep == 3:
        saved = probs

    y = grouped_matmul(probs, v, dtype)  # (B, H, T, Dv)
    if is_3d:
        y = y.transpose(0, 2, 1, 3).reshape(b, t_len, h * y.shape[-1])  # (B, T, H*Dv)
    return y, k, v, saved


@op("Attention", since=23, wants=("outputs_used",))
def attention_v23(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    attn_mask: np.ndarray | None = None,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    nonpad_kv_seqlen: np.ndarray | None = None,
    *,
    is_causal: int = 0,
    kv_num_heads: int | None = None,
    q_num_heads: int | None = None,
    qk_matmul_output_mode: int = 0,
    scale: float | None = None,
    softcap: float = 0.0,
    softmax_precision: int | None = None,
    outputs_used: tuple[bool, ...] = (True, True, True, True),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Opsets 23-24 (24 adds the nonpad_kv_seqlen input): no sliding window."""
    return attention(
        q,
        k,
        v,
        attn_mask,
        past_key,
        past_value,
        nonpad_kv_seqlen,
        is_causal=is_causal,
        kv_num_heads=kv_num_heads,
        q_num_heads=q_num_heads,
        qk_matmul_output_mode=qk_matmul_output_mode,
        scale=scale,
        softcap=softcap,
        softmax_precision=softmax_precision,
        outputs_used=outputs_used,
    )


op("Attention", since=25, wants=("outputs_used",))(attention)
