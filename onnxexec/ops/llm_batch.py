"""Decoder ops for a batch of sequences, one token each ('onnxexec' domain), made by
llm/batch_graph.py from the graphs of llm/graph.py (fused or not).

Row i of the activations is the next token of a sequence at position pos[i] whose KV
cache is slot slot[i] of the (S, C, Hkv, Dh) caches. Everything but attention is
row-wise already (RMSNorm, QMatMul, GatedAct, FFNBlock, NormQMatMul take the N rows as
a T = N batch: each weight is read once for all of them); these ops give each row its
own position and cache, and compute every row exactly as the op it replaces computes a
single token (T = 1): RoPE at that row's position, KVAttention / AttnBlock's one-token
attention on that row's cache.

  RoPERows        RoPE with one position per row
  SlotKVAttention KVAttention with one position and cache slot per row
  SlotAttnBlock   AttnBlock (ops/llm_fused.py) likewise; N = 1 is AttnBlock itself
  SlotFFNBlock    FFNBlock with its N-row products prepared (ops/llm_batch_rows.py)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxexec.ops.llm import kv_attention_op, rope
from onnxexec.ops.llm_batch_rows import RowsState, attn_rows, ffn_rows, prepare_rows
from onnxexec.ops.llm_fused import (
    attend_one_token,
    attn_block,
    ffn_block,
    out_product,
    project,
)
from onnxexec.ops.registry import op

D = "onnxexec"


@op("RoPERows", 1, domain=D)
def rope_rows(
    x: np.ndarray,
    pos: np.ndarray,
    *,
    head_dim: int,
    n_dims: int = 0,
    base: float = 10000.0,
    freq_scale: float = 1.0,
    style: str = "norm",
) -> np.ndarray:
    """(N, H*Dh) f32, row i rotated as RoPE rotates one token at position pos[i]."""
    out = np.empty(x.shape, np.float32)
    for i, p in enumerate(np.asarray(pos).reshape(-1)):
        out[i] = rope(
            np.ascontiguousarray(x[i : i + 1]),
            np.int64(p),
            head_dim=head_dim,
            n_dims=n_dims,
            base=base,
            freq_scale=freq_scale,
            style=style,
        )[0]
    return out


@op("SlotKVAttention", 1, domain=D)
def slot_kv_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: np.ndarray,
    slot: np.ndarray,
    *,
    head_dim: int,
    scale: float = 0.0,
    q_scale: float = 1.0,
    window: int = 0,
    softcap: float = 0.0,
    kv_f16: int = 0,
) -> np.ndarray:
    """KVAttention of each row on its own cache: row i's k, v written at pos[i] of
    slot[i] of the (S, C, Hkv, Dh) caches, its q attending over [0, pos[i]]."""
    out = np.empty(q.shape, np.float32)
    ps, ss = np.asarray(pos).reshape(-1), np.asarray(slot).reshape(-1)
    for i, (p, s) in enumerate(zip(ps, ss, strict=True)):
        out[i] = kv_attention_op(
            np.ascontiguousarray(q[i : i + 1]),
            np.ascontiguousarray(k[i : i + 1]),
            np.ascontiguousarray(v[i : i + 1]),
            k_cache[s],
            v_cache[s],
            np.int64(p),
            head_dim=head_dim,
            scale=scale,
            q_scale=q_scale,
            window=window,
            softcap=softcap,
            kv_f16=kv_f16,
        )[0]
    return out


@op("SlotFFNBlock", 1, domain=D, prepare=prepare_rows(2, (2, 1)))
def slot_ffn_block(
    x: np.ndarray,
    norm_w: np.ndarray,
    wg: Any,
    wu: Any,
    wd: Any,
    *,
    epsilon: float = 1e-5,
    act: str = "silu",
    mode: str = "auto",
    prepared: RowsState | None = None,
) -> np.ndarray:
    """FFNBlock of N sequences' rows (row-wise: the same bits as FFNBlock on them)."""
    dots = prepared.rows(x.shape[0]) if prepared is not None and x.shape[0] > 1 else None
    if dots is not None:
        return ffn_rows(x, norm_w, epsilon, act, dots)
    one = prepared.one if prepared is not None else None
    return ffn_block(x, norm_w, wg, wu, wd, epsilon=epsilon, act=act, mode=mode, prepared=one)


@op("SlotAttnBlock", 1, domain=D, prepare=prepare_rows(2, (3, 1)))
def slot_attn_block(
    x: np.ndarray,
    norm_w: np.ndarray,
    wq: Any,
    wk: Any,
    wv: Any,
    wo: Any,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: np.ndarray,
    slot: np.ndarray,
    *,
    epsilon: float = 1e-5,
    head_dim: int,
    n_dims: int = 0,
    base: float = 10000.0,
    freq_scale: float = 1.0,
    style: str = "norm",
    scale: float = 0.0,
    q_scale: float = 1.0,
    window: int = 0,
    softcap: float = 0.0,
    kv_f16: int = 0,
    mode: str = "auto",
    prepared: RowsState | None = None,
) -> np.ndarray:
    """AttnBlock over N sequences, one token each: (N, D) f32 -> (N, D) f32. The
    projections run on the N rows at once, the attention per row on its own cache."""
    ps = np.asarray(pos).reshape(-1).tolist()
    ss = np.asarray(slot).reshape(-1).tolist()
    n = len(ps)
    dots = prepared.rows(n) if prepared is not None and n > 1 else None
    if dots is not None and kv_f16 and style in ("norm", "neox"):
        return attn_rows(
            x, norm_w, k_cache, v_cache, ps, ss, dots, epsilon, head_dim, n_dims, base,
            freq_scale, style == "neox", q_scale, scale, window, softcap,
        )  # fmt: skip
    rope_kw = dict(head_dim=head_dim, n_dims=n_dims, base=base, freq_scale=freq_scale, style=style)
    att_kw = dict(
        head_dim=head_dim,
        scale=scale,
        q_scale=q_scale,
        window=window,
        softcap=softcap,
        kv_f16=kv_f16,
    )
    if len(ps) == 1:  # one sequence: the one-token path itself
        kw = dict(rope_kw, **att_kw)
        return attn_block(
            x, norm_w, wq, wk, wv, wo, k_cache[ss[0]], v_cache[ss[0]], np.int64(ps[0]),
            epsilon=epsilon, mode=mode, prepared=prepared.one if prepared else None, **kw,
        )  # fmt: skip
    (q, k, v), qkv, offs = project(x, norm_w, epsilon, (wq, wk, wv), mode)
    a = np.empty((len(ps), q.shape[1]), np.float32)
    if kv_f16 and style in ("norm", "neox"):  # AttnBlock's one-token attention, per row
        if qkv is None:
            qkv = np.concatenate([q, k, v], axis=1)
            offs = (0, q.shape[1], q.shape[1] + k.shape[1])
        for i, (p, s) in enumerate(zip(ps, ss, strict=True)):
            attend_one_token(
                qkv[i : i + 1], offs, a[i : i + 1], k_cache[s], v_cache[s], p,
                head_dim, n_dims or head_dim, base, freq_scale, style == "neox",
                q_scale, scale or 1.0 / math.sqrt(head_dim), window, softcap,
            )  # fmt: skip
    else:
        for i, (p, s) in enumerate(zip(ps, ss, strict=True)):
            qi = rope(np.ascontiguousarray(q[i : i + 1]), np.int64(p), **rope_kw)
            ki = rope(np.ascontiguousarray(k[i : i + 1]), np.int64(p), **rope_kw)
            a[i] = kv_attention_op(
                qi, ki, np.ascontiguousarray(v[i : i + 1]), k_cache[s], v_cache[s],
                np.int64(p), **att_kw,
            )[0]  # fmt: skip
    return x + out_product(a, wo, mode)
