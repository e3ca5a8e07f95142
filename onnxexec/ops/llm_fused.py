"""Fused decoder-layer ops ('onnxexec' domain), made by the LLM pass set
(passes/llm_blocks.py) from the graphs of llm/graph.py. Each computes exactly what the
chain it replaces computes (ops/llm.py), bit for bit:

  AttnBlock   x + Wo . KVAttention(RoPE(Wq . h), RoPE(Wk . h), Wv . h),  h = RMSNorm(x)
  FFNBlock    x + Wd . GatedAct(Wg . h, Wu . h),                          h = RMSNorm(x)
  NormQMatMul W . RMSNorm(x)

Why: one token of a small model is hundreds of tiny ops; fused, a layer is two
executor steps, the activations are quantized once per matmul input (not once per
weight), weights fused by qmatmul.fuse_rows (Q|K|V, gate|up) run as one kernel, and
for T = 1 the glue between the matmuls runs in serial kernels (kernels/attn/llm_fused.py)
instead of numpy temporaries and thread-pool wake-ups, all of an op in one compiled
call (ops/llm_decode.py). Prompt processing (T > 1) composes the ops/llm.py
handlers, around the same fused matmuls.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxexec.kernels.attn.attention import ggml_n_kv
from onnxexec.kernels.attn.llm_fused import (
    ATTEND_ONE,
    norm_quant,
    norm_quant8,
    rope_store_one,
    swiglu_quant,
    swiglu_quant8,
)
from onnxexec.kernels.quant.actquant import quantize_act, quantize_act8
from onnxexec.kernels.quant.ggml_dot import simd_dot_many
from onnxexec.kernels.quant.ggml_dot_k import K_TYPES as K_SIMD_TYPES
from onnxexec.kernels.quant.qmatmul import QWeight, int8_path, qmatmul_q, simd_operand
from onnxexec.ops.llm import gated_act, kv_attention_op, q_matmul, rms_norm, rope
from onnxexec.ops.llm_decode import (
    PAR_MIN_ATTN,
    DecodeState,
    all_simd,
    attn_decode,
    ffn_decode,
    norm_qmatmul_decode,
    prepare_decode,
)
from onnxexec.ops.registry import op

D = "onnxexec"


def _all_int8(ws: tuple[Any, ...], t_rows: int, mode: str) -> bool:
    return all(isinstance(w, QWeight) and int8_path(w, t_rows, mode) for w in ws)


def _simd_products(
    x8: np.ndarray | None, xst: np.ndarray | None, ws: tuple[Any, ...], x: np.ndarray
) -> np.ndarray:
    """[x @ w^T for w in ws] side by side, (T, sum N) f32, from (x8, xst) =
    quantize_act8(x) (None when every weight is a K-quant: they quantize x to Q8_K)."""
    y = np.empty((x.shape[0], sum(w.shape[0] for w in ws)), np.float32)
    return simd_dot_many([simd_operand(w) for w in ws], x8, xst, y, x)


def _project(
    x: np.ndarray, norm_w: np.ndarray, eps: float, ws: tuple[Any, ...], mode: str
) -> tuple[list[np.ndarray], np.ndarray | None, tuple[int, ...]]:
    """h = RMSNorm(x) * norm_w, then [h @ w^T for w in ws] (views), with the 2-D array
    they are column slices of and their column offsets (or None, ())."""
    t_rows = x.shape[0]
    if all_simd(ws, t_rows, mode):
        x = np.ascontiguousarray(x, dtype=np.float32)
        h = np.empty_like(x)
        y = _simd_products(*norm_quant8(x, norm_w, np.float32(eps), h), ws, h)
        offs, c = [], 0
        for w in ws:
            offs.append(c)
            c += w.shape[0]
        return [y[:, o : o + w.shape[0]] for o, w in zip(offs, ws, strict=True)], y, tuple(offs)
    h, quant = _norm(x, norm_w, eps, ws, mode)
    ys = _products(h, quant, ws, mode)
    base = ys[0].base if ys[0].base is not None and ys[0].base.ndim == 2 else None
    if base is None or any(y.base is not base for y in ys):
        return ys, None, ()
    return ys, base, tuple(w.col0 for w in ws)


def _products(
    h: np.ndarray, quant: tuple | None, ws: tuple[Any, ...], mode: str
) -> list[np.ndarray]:
    """[h @ w^T for w in ws], one product per fuse_rows parent that two or more of `ws`
    share (sliced: rows are independent in qmatmul's int8 kernels). With `quant` =
    quantize_act(h) (every weight on the int8 path) the activations are quantized
    once; otherwise each product goes through qmatmul's own dispatch."""
    t_rows = h.shape[0]
    parents = [getattr(w, "parent", None) for w in ws]
    shared = {id(p) for p in parents if p is not None and parents.count(p) > 1}
    if mode != "int8" and quant is None:
        shared = set()  # float paths: BLAS may tile a fused product differently
    done: dict[int, np.ndarray] = {}
    out = []
    for w, p in zip(ws, parents, strict=True):
        target = p if p is not None and id(p) in shared else w
        if id(target) not in done:
            if quant is not None:
                y = np.empty((t_rows, target.shape[0]), np.float32)
                done[id(target)] = qmatmul_q(quant[0], quant[1], target, y)
            else:
                done[id(target)] = q_matmul(h, target, mode=mode)
        y = done[id(target)]
        out.append(y[:, w.col0 : w.col0 + w.shape[0]] if target is not w else y)
    return out


def _norm(
    x: np.ndarray, w: np.ndarray, eps: float, ws: tuple[Any, ...], mode: str
) -> tuple[np.ndarray, tuple | None]:
    """h = RMSNorm(x) * w, and quantize_act(h) when every weight takes the int8 path."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if _all_int8(ws, x.shape[0], mode):
        h = np.empty_like(x)
        return h, norm_quant(x, w, np.float32(eps), h)
    return rms_norm(x, w, epsilon=eps), None


@op("AttnBlock", 1, domain=D, prepare=prepare_decode(2, 4))
def attn_block(
    x: np.ndarray,
    norm_w: np.ndarray,
    wq: Any,
    wk: Any,
    wv: Any,
    wo: Any,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: np.ndarray,
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
    prepared: DecodeState | None = None,
) -> np.ndarray:
    """Pre-norm attention with its residual: (T, D) f32 -> (T, D) f32. The k/v caches
    are written in place at rows pos..pos+T-1 (as KVAttention)."""
    p = int(pos)
    if x.shape[0] == 1 and kv_f16 and style in ("norm", "neox") and 0 <= p < k_cache.shape[0]:
        attrs = (mode, epsilon, head_dim, n_dims, base, freq_scale, style == "neox")
        attrs += (q_scale, scale, window, softcap)
        y = attn_decode(x, norm_w, wq, wk, wv, wo, k_cache, v_cache, p, attrs, prepared)
        if y is not None:
            return y
    (q, k, v), qkv, offs = _project(x, norm_w, epsilon, (wq, wk, wv), mode)
    if (
        q.shape[0] == 1
        and kv_f16
        and style in ("norm", "neox")
        and 0 <= p < k_cache.shape[0]
        and k_cache.flags.c_contiguous
        and v_cache.flags.c_contiguous
    ):
        if qkv is None:  # else q, k, v are slices of one fused product at offs
            qkv = np.concatenate([q, k, v], axis=1)
            offs = (0, q.shape[1], q.shape[1] + k.shape[1])
        a = np.empty((1, q.shape[1]), np.float32)
        _attend_one_token(
            qkv,
            offs,
            a,
            k_cache,
            v_cache,
            p,
            head_dim,
            n_dims or head_dim,
            base,
            freq_scale,
            style == "neox",
            q_scale,
            scale or 1.0 / math.sqrt(head_dim),
            window,
            softcap,
        )
        return x + _out_product(a, wo, mode)
    rope_kw = dict(head_dim=head_dim, n_dims=n_dims, base=base, freq_scale=freq_scale, style=style)
    q = rope(np.ascontiguousarray(q), pos, **rope_kw)
    k = rope(np.ascontiguousarray(k), pos, **rope_kw)
    a = kv_attention_op(
        q,
        k,
        np.ascontiguousarray(v),
        k_cache,
        v_cache,
        pos,
        head_dim=head_dim,
        scale=scale,
        q_scale=q_scale,
        window=window,
        softcap=softcap,
        kv_f16=kv_f16,
    )
    return x + _out_product(a, wo, mode)


def _attend_one_token(
    qkv,
    offs,
    a,
    k_cache,
    v_cache,
    p,
    head_dim,
    n_dims,
    base,
    freq_scale,
    neox,
    q_scale,
    scale,
    window,
    softcap,
) -> np.ndarray:
    """RoPE + cache write + attention of one token (kernels/attn/llm_fused.py) into a
    (1, H*Dh), from q, k, v at columns offs of qkv (1, *)."""
    width = a.shape[1]
    qr = np.empty(width, np.float32)
    rope_store_one(
        qkv,
        *offs,
        k_cache,
        v_cache,
        p,
        head_dim,
        n_dims,
        np.float32(base),
        np.float32(freq_scale),
        neox,
        qr,
    )
    span = p + 1 if not window else min(window, p + 1)
    kern = ATTEND_ONE[0] if width * span >= PAR_MIN_ATTN else ATTEND_ONE[1]
    kern(
        qr,
        k_cache,
        v_cache,
        p,
        np.float32(q_scale),
        np.float32(scale),
        window,
        np.float32(softcap),
        ggml_n_kv(p, 1, k_cache.shape[0]),
        a,
    )
    return a


def _out_product(a: np.ndarray, w: Any, mode: str) -> np.ndarray:
    """a @ w^T, through qmatmul_q when w takes the int8 path (same bits as qmatmul)."""
    if all_simd((w,), a.shape[0], mode):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if w.ggml_type in K_SIMD_TYPES:  # Q8_K activations, quantized by the kernel's caller
            return _simd_products(None, None, (w,), a)
        return _simd_products(*quantize_act8(a), (w,), a)
    if _all_int8((w,), a.shape[0], mode):
        aq, ast = quantize_act(a)
        return qmatmul_q(aq, ast, w, np.empty((a.shape[0], w.shape[0]), np.float32))
    return q_matmul(a, w, mode=mode)


@op("FFNBlock", 1, domain=D, prepare=prepare_decode(2, 3))
def ffn_block(
    x: np.ndarray,
    norm_w: np.ndarray,
    wg: Any,
    wu: Any,
    wd: Any,
    *,
    epsilon: float = 1e-5,
    act: str = "silu",
    mode: str = "auto",
    prepared: DecodeState | None = None,
) -> np.ndarray:
    """Pre-norm gated FFN with its residual: (T, D) f32 -> (T, D) f32."""
    if x.shape[0] == 1 and act == "silu_ggml":
        y = ffn_decode(x, norm_w, wg, wu, wd, epsilon, mode, prepared)
        if y is not None:
            return y
    (g, u), _, _ = _project(x, norm_w, epsilon, (wg, wu), mode)
    if g.shape[0] == 1 and act == "silu_ggml":
        f = np.empty(g.shape, np.float32)
        if all_simd((wd,), 1, mode):
            return x + _simd_products(*swiglu_quant8(g, u, f), (wd,), f)
        fq, fst = swiglu_quant(g, u, f)
        if _all_int8((wd,), 1, mode):
            return x + qmatmul_q(fq, fst, wd, np.empty((1, wd.shape[0]), np.float32))
        return x + q_matmul(f, wd, mode=mode)
    f = gated_act(np.ascontiguousarray(g), np.ascontiguousarray(u), act=act)
    return x + q_matmul(f, wd, mode=mode)


@op("NormQMatMul", 1, domain=D, prepare=prepare_decode(2, 1))
def norm_qmatmul(
    x: np.ndarray,
    norm_w: np.ndarray,
    w: Any,
    *,
    epsilon: float = 1e-5,
    mode: str = "auto",
    prepared: DecodeState | None = None,
) -> np.ndarray:
    """RMSNorm then a matmul (the output head): (T, D) f32 -> (T, N) f32."""
    if x.shape[0] == 1:
        y = norm_qmatmul_decode(x, norm_w, w, epsilon, mode, prepared)
        if y is not None:
            return y
    return _project(x, norm_w, epsilon, (w,), mode)[0][0]


# the pieces ops/llm_batch.py composes for several sequences, one token each
project = _project
attend_one_token = _attend_one_token
out_product = _out_product
