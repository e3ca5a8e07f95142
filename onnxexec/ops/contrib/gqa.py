"""com.microsoft GroupQueryAttention as onnxruntime's CPU kernel computes it
(docs/ContribOperators.md; contrib_ops/cpu/bert/group_query_attention.cc and
gqa_attention_base.h): Nq query heads share Nkv key / value heads, the KV cache is a
(B, Nkv, T, H) buffer with per-sequence lengths seqlens_k + 1, optional rotary."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.attn.attention import kv_attention
from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.contrib.rotary import cos_sin, rotate
from onnxexec.ops.registry import op


def _bnsh(x: np.ndarray, n: int) -> np.ndarray:
    b, s, d = x.shape
    return x.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)


def _unsupported(**given: object) -> None:
    for name, value in given.items():
        if value is not None and value is not False:
            raise NotImplementedError(f"GroupQueryAttention: {name} is not supported")


def _attend_cache(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, start: int, scale: float, window: int
) -> np.ndarray:
    """One sequence's causal attention on the GGUF path's float kernel (kernels/attn/
    attention.kv_attention: float32 dot products, softmax summed in float64), reading
    the present cache in place: q (Nq, S, H) at positions start.., k / v (Nkv, T, H)
    holding positions [0, start + S) -> (Nq, S, H). Its window rule (p - j < W) is
    GroupQueryAttention's local_window_size (j > p - W)."""
    nq, s, h = q.shape
    qt = np.ascontiguousarray(q.transpose(1, 0, 2)).reshape(s, nq * h)
    kc, vc = k.transpose(1, 0, 2), v.transpose(1, 0, 2)  # (T, Nkv, H) views
    y = kv_attention(qt, kc, vc, start, scale, window=max(window, 0))
    return y.reshape(s, nq, h).transpose(1, 0, 2)


@op("GroupQueryAttention", 1, domain=MS_DOMAIN, wants=("outputs_used",))
def group_query_attention(
    query: np.ndarray,
    key: np.ndarray | None,
    value: np.ndarray | None,
    past_key: np.ndarray | None,
    past_value: np.ndarray | None,
    seqlens_k: np.ndarray,
    total_sequence_length: np.ndarray,
    cos_cache: np.ndarray | None = None,
    sin_cache: np.ndarray | None = None,
    position_ids: np.ndarray | None = None,
    attention_bias: np.ndarray | None = None,
    head_sink: np.ndarray | None = None,
    k_scale: np.ndarray | None = None,
    v_scale: np.ndarray | None = None,
    q_norm_weight: np.ndarray | None = None,
    k_norm_weight: np.ndarray | None = None,
    query_seqlens: np.ndarray | None = None,
    *,
    num_heads: int,
    kv_num_heads: int,
    scale: float = 0.0,
    softcap: float = 0.0,
    local_window_size: int = -1,
    do_rotary: int = 0,
    rotary_interleaved: int = 0,
    causal: int = 1,
    smooth_softmax: int = -1,
    qk_output: int = 0,
    sliding_window_cache: int = 0,
    kv_cache_bit_width: int = 0,
    k_quant_type: str = "NONE",
    v_quant_type: str = "NONE",
    q_norm_epsilon: float = 1e-6,
    k_norm_epsilon: float = 1e-6,
    qk_norm_epsilon: float = 1e-6,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """query (B, S, Nq*H) (or packed (B, S, (Nq + 2 Nkv) H) with key / value omitted),
    key / value (B, S, Nkv*H), past_key / past_value (B, Nkv, P, H), seqlens_k (B,) =
    each sequence's total length - 1, total_sequence_length (). Outputs (output
    (B, S, Nq*H), present_key / present_value (B, Nkv, max(P, total), H)).

    A sequence's new tokens sit at positions total_b - S .. total_b - 1 (0 .. S-1 on
    the first prompt, when S == total_sequence_length); each query sees the keys up to
    its own position (causal), within local_window_size when that is > 0; a head_sink
    logit (or smooth_softmax's 0) joins each softmax denominator."""
    _unsupported(
        k_scale=k_scale,
        v_scale=v_scale,
        q_norm_weight=q_norm_weight,
        k_norm_weight=k_norm_weight,
        query_seqlens=query_seqlens,
        qk_output=bool(qk_output),
        sliding_window_cache=bool(sliding_window_cache),
        kv_cache_bit_width=bool(kv_cache_bit_width),
        quantized_cache=k_quant_type != "NONE" or v_quant_type != "NONE",
        non_causal=not causal,
    )
    nq, nkv = num_heads, kv_num_heads
    if key is None:  # packed QKV along the last axis
        h = query.shape[-1] // (nq + 2 * nkv)
        qkv = query
        query, key, value = (
            qkv[..., : nq * h],
            qkv[..., nq * h : (nq + nkv) * h],
            qkv[..., (nq + nkv) * h :],
        )
    if key is None or value is None:
        raise ValueError("GroupQueryAttention: key and value must be given together")
    b, s, _ = query.shape
    h = query.shape[-1] // nq
    q, k, v = _bnsh(query, nq), _bnsh(key, nkv), _bnsh(value, nkv)
    total = int(np.asarray(total_sequence_length).reshape(-1)[0])
    lens = np.asarray(seqlens_k, dtype=np.int64).reshape(b) + 1  # each sequence's total
    first_prompt = s == total
    starts = np.zeros(b, np.int64) if first_prompt else lens - s  # past length per sequence
    if do_rotary:
        if position_ids is None:
            pos = starts[:, None] + np.arange(s)[None]
        elif first_prompt:  # onnxruntime reads its first entry as the offset of all rows
            pos = int(np.asarray(position_ids).reshape(-1)[0]) + np.arange(s)[None]
        else:
            pos = np.asarray(position_ids, np.int64)
        pos = np.broadcast_to(pos, (b, s))
        cos, sin = cos_sin(cos_cache, sin_cache, pos)
        cq, sq = cos.astype(q.dtype, copy=False), sin.astype(q.dtype, copy=False)
        q = rotate(q, cq, sq, rotary_interleaved)
        k = rotate(
            k, cq.astype(k.dtype, copy=False), sq.astype(k.dtype, copy=False), rotary_interleaved
        )
    p = 0 if past_key is None else past_key.shape[2]
    t_buf = max(p, total)
    # zeros only where no past or new entry lands (a max-length shared buffer's tail)
    fill = np.zeros if t_buf > int(starts.min()) + s else np.empty
    present_k = fill((b, nkv, t_buf, h), dtype=key.dtype)
    present_v = fill((b, nkv, t_buf, h), dtype=value.dtype)
    out = np.zeros((b, nq, s, h), dtype=np.float32)
    group = nq // nkv
    sc = np.float32(scale or 1.0 / np.sqrt(h))
    plain = (
        attention_bias is None
        and head_sink is None
        and smooth_softmax <= 0
        and softcap <= 0
        and q.dtype == np.float32
        and present_k.dtype == np.float32
    )
    for i in range(b):
        start = int(starts[i])
        if past_key is not None and past_value is not None and start:
            present_k[i, :, :start] = past_key[i, :, :start]
            present_v[i, :, :start] = past_value[i, :, :start]
        present_k[i, :, start : start + s] = k[i]
        present_v[i, :, start : start + s] = v[i]
        n_keys = int(lens[i]) if not first_prompt else min(int(lens[i]), s)
        if plain and n_keys == start + s:  # not a padded prompt row
            out[i] = _attend_cache(
                q[i], present_k[i], present_v[i], start, float(sc), local_window_size
            )
            continue
        kk = np.repeat(present_k[i, :, :n_keys], group, axis=0).astype(np.float32)
        vv = np.repeat(present_v[i, :, :n_keys], group, axis=0).astype(np.float32)
        scores = np.matmul(q[i].astype(np.float32), kk.swapaxes(-1, -2)) * sc  # (Nq, S, T)
        if softcap > 0:
            scores = np.float32(softcap) * np.tanh(scores / np.float32(softcap))
        qpos = start + np.arange(s)[:, None]
        j = np.arange(n_keys)[None, :]
        visible = j <= qpos
        if local_window_size > 0:
            visible &= j > qpos - local_window_size
        if attention_bias is not None:  # (B|1, Nq|1, S, T)
            ab = attention_bias[i if attention_bias.shape[0] > 1 else 0]
            scores = scores + ab[..., :n_keys].astype(np.float32)
        scores = np.where(visible[None], scores, -np.inf)
        m = scores.max(axis=-1, keepdims=True)
        # a sink logit joins each row's denominator only: head_sink (Nq,) per head, or
        # smooth_softmax's 0 (an "off-by-one" softmax)
        sink = None
        if head_sink is not None:
            sink = head_sink.astype(np.float32).reshape(nq, 1, 1)
        elif smooth_softmax > 0:
            sink = np.zeros((nq, 1, 1), np.float32)
        if sink is not None:
            m = np.maximum(m, sink)
        m = np.where(np.isfinite(m), m, 0)
        e = np.exp(scores - m)
        den = e.sum(axis=-1, keepdims=True)
        if sink is not None:
            den = den + np.exp(sink - m)
        probs = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
        out[i] = np.matmul(probs, vv)
    y = out.transpose(0, 2, 1, 3).reshape(b, s, nq * h).astype(query.dtype)
    used = tuple(outputs_used) + (False,) * 3
    return y, (present_k if used[1] else None), (present_v if used[2] else None), None
