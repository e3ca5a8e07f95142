"""Fused decoder-layer ops ('onnxexec' domain), made by ir/passes/fuse_llm.py from the
graphs of llm/graph.py. Each computes exactly what the chain it replaces computes
(ops/llm.py), bit for bit:

  AttnBlock   x + Wo . KVAttention(RoPE(Wq . h), RoPE(Wk . h), Wv . h),  h = RMSNorm(x)
  FFNBlock    x + Wd . GatedAct(Wg . h, Wu . h),                          h = RMSNorm(x)
  NormQMatMul W . RMSNorm(x)

Why: one token of a small model is hundreds of tiny ops; fused, a layer is two
executor steps, the activations are quantized once per matmul input (not once per
weight), weights fused by qmatmul.fuse_rows (Q|K|V, gate|up) run as one kernel, and
for T = 1 the glue between the matmuls runs in serial kernels (kernels/llm_fused.py)
instead of numpy temporaries and thread-pool wake-ups. Prompt processing (T > 1)
composes the ops/llm.py handlers, around the same fused matmuls.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Final

import numpy as np

from onnxexec.kernels import ggml_simd, ggml_simd_k
from onnxexec.kernels import qtypes as qt
from onnxexec.kernels.actquant import quantize_act, quantize_act8
from onnxexec.kernels.attention import ggml_n_kv
from onnxexec.kernels.ggml_dot import simd_dot_many, simd_ok
from onnxexec.kernels.ggml_dot_k import K_TYPES as K_SIMD_TYPES
from onnxexec.kernels.lanes import pick
from onnxexec.kernels.llm_fused import (
    ATTEND_ONE,
    norm_quant,
    norm_quant8,
    norm_quant_into,
    quant_into,
    rope_store_one,
    swiglu_quant,
    swiglu_quant8,
    swiglu_quant_into,
)
from onnxexec.kernels.qmatmul import BLAS_MIN_T, QWeight, int8_path, qmatmul_q
from onnxexec.ops.llm import gated_act, kv_attention_op, q_matmul, rms_norm, rope
from onnxexec.ops.registry import op

D = "onnxexec"
PAR_MIN_ATTN: Final = 1 << 17  # query width x cells from which heads run in parallel


class _Dot:
    """One decode (T = 1) product of a weight group on ggml_simd's kernels: the
    arguments simd_dot_many would gather on every call, gathered once, and the
    activation, quantization and output buffers, owned here and reused every token
    (decode runs ~4 groups per layer per token: the Python around each call counted
    for ~15% of a token). Same kernel, same arguments, same bits as simd_dot_many."""

    __slots__ = (
        "a",
        "args",
        "block",
        "h",
        "kern",
        "kq",
        "n_chunks",
        "offs",
        "others",
        "q",
        "y",
    )

    def __init__(self, ws: tuple[Any, ...]) -> None:
        k = ws[0].shape[1]
        types_ = [int(w.ggml_type) for w in ws]
        kinds = tuple(ggml_simd.KINDS.get(t, ggml_simd_k.KINDS.get(t, -1)) for t in types_)
        offs, c = [], 0
        for w in ws:
            offs.append(c)
            c += w.shape[0]
        self.offs = tuple(offs)
        self.others = ws[1:]  # kept alive: the cache is keyed by ws[0] and the ids of these
        # what simd_dot_many quantizes for T = 1 (rows4 = 0: one Q8_K set for both types)
        self.kq = qt.Q4_K in types_ or qt.Q6_K in types_
        self.block = any(t in ggml_simd.KINDS for t in types_)
        x8 = np.empty((1, k), np.int8) if self.block else _NO_X8
        xst = np.empty((1, 3, k // 32), np.float32) if self.block else _NO_XST
        xk = _NO_XK
        if self.kq:
            xk = (np.empty((1, k), np.int8), np.empty((1, k // 256), np.float32))
            xk += (np.empty((1, k // 16), np.int32),)
        self.q = (self.block, self.kq, x8, xst, *xk)
        self.h = np.empty((1, k), np.float32)
        self.y = np.empty((1, c), np.float32)
        self.kern, n_chunks = pick(ggml_simd_k.DOT_MANY, c * k)
        raws = tuple(w.arrays["raw"] for w in ws)
        rbs = tuple(int(w.arrays["row_bytes"]) for w in ws)
        self.args = (raws, rbs, kinds, self.offs, x8, xst, *xk, 0)
        self.n_chunks = n_chunks
        self.a = None  # the attention's output buffer, on first use

    def run(self, out: np.ndarray | None = None) -> np.ndarray:
        """out (default self.y) = the products of the quantized activations in self.q."""
        y = self.y if out is None else out
        self.kern(*self.args, y, self.n_chunks)
        return y


_NO_X8 = np.zeros((1, 32), np.int8)
_NO_XST = np.zeros((1, 3, 1), np.float32)
_NO_XK = (np.zeros((1, 256), np.int8), np.zeros((1, 1), np.float32), np.zeros((1, 16), np.int32))
_DOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _dot(ws: tuple[Any, ...], mode: str) -> _Dot | None:
    """The cached _Dot of a weight group for T = 1, or None when ggml_simd can't run it."""
    if not isinstance(ws[0], QWeight):
        return None
    per = _DOTS.get(ws[0])
    if per is None:
        per = _DOTS[ws[0]] = {}
    key = (mode, *map(id, ws[1:]))
    d = per.get(key)
    if d is None:
        d = per[key] = _Dot(ws) if _all_simd(ws, 1, mode) else False
    return d or None


def _all_int8(ws: tuple[Any, ...], t_rows: int, mode: str) -> bool:
    return all(isinstance(w, QWeight) and int8_path(w, t_rows, mode) for w in ws)


def _all_simd(ws: tuple[Any, ...], t_rows: int, mode: str) -> bool:
    """Every weight is GGUF bytes of a ggml_simd type (what qmatmul hands to ggml_dot's
    AVX2 kernels in its int8 mode), one row length."""
    if not (mode == "int8" or (mode == "auto" and t_rows < BLAS_MIN_T)):
        return False
    return all(
        isinstance(w, QWeight)
        and w.layout == "raw"
        and simd_ok(w.ggml_type, w.shape[0])
        and w.shape[1] == ws[0].shape[1]
        for w in ws
    )


def _simd_products(
    x8: np.ndarray | None, xst: np.ndarray | None, ws: tuple[Any, ...], x: np.ndarray
) -> np.ndarray:
    """[x @ w^T for w in ws] side by side, (T, sum N) f32, from (x8, xst) =
    quantize_act8(x) (None when every weight is a K-quant: they quantize x to Q8_K)."""
    y = np.empty((x.shape[0], sum(w.shape[0] for w in ws)), np.float32)
    return simd_dot_many(
        [(w.arrays["raw"], w.arrays["row_bytes"], w.ggml_type) for w in ws], x8, xst, y, x
    )


def _project(
    x: np.ndarray, norm_w: np.ndarray, eps: float, ws: tuple[Any, ...], mode: str
) -> tuple[list[np.ndarray], np.ndarray | None, tuple[int, ...]]:
    """h = RMSNorm(x) * norm_w, then [h @ w^T for w in ws] (views), with the 2-D array
    they are column slices of and their column offsets (or None, ())."""
    t_rows = x.shape[0]
    if _all_simd(ws, t_rows, mode):
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


@op("AttnBlock", 1, domain=D)
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
) -> np.ndarray:
    """Pre-norm attention with its residual: (T, D) f32 -> (T, D) f32. The k/v caches
    are written in place at rows pos..pos+T-1 (as KVAttention)."""
    p = int(pos)
    if x.shape[0] == 1 and kv_f16 and style in ("norm", "neox") and 0 <= p < k_cache.shape[0]:
        g = _dot((wq, wk, wv), mode)
        go = _dot((wo,), mode)
        if (
            g is not None
            and go is not None
            and k_cache.flags.c_contiguous
            and v_cache.flags.c_contiguous
        ):
            norm_quant_into(_f32(x), norm_w, np.float32(epsilon), g.h, *g.q)
            qkv = g.run()
            a = _attend_buffers(g, wq.shape[0])
            _attend_one_token(
                qkv,
                g.offs,
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
            quant_into(a, *go.q)
            return x + go.run()
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


def _f32(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float32 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float32)


def _attend_buffers(g: _Dot, width: int) -> np.ndarray:
    """The (1, H*Dh) attention output buffer of a Q|K|V group."""
    if g.a is None:
        g.a = np.empty((1, width), np.float32)
    return g.a


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
    """RoPE + cache write + attention of one token (kernels/llm_fused.py) into a
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
    if _all_simd((w,), a.shape[0], mode):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if w.ggml_type in K_SIMD_TYPES:  # Q8_K activations, quantized by the kernel's caller
            return _simd_products(None, None, (w,), a)
        return _simd_products(*quantize_act8(a), (w,), a)
    if _all_int8((w,), a.shape[0], mode):
        aq, ast = quantize_act(a)
        return qmatmul_q(aq, ast, w, np.empty((a.shape[0], w.shape[0]), np.float32))
    return q_matmul(a, w, mode=mode)


@op("FFNBlock", 1, domain=D)
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
) -> np.ndarray:
    """Pre-norm gated FFN with its residual: (T, D) f32 -> (T, D) f32."""
    if x.shape[0] == 1 and act == "silu_ggml":
        gu = _dot((wg, wu), mode)
        gd = _dot((wd,), mode)
        if gu is not None and gd is not None:
            norm_quant_into(_f32(x), norm_w, np.float32(epsilon), gu.h, *gu.q)
            y = gu.run()
            f = wg.shape[0]
            swiglu_quant_into(y[:, :f], y[:, f:], gd.h, *gd.q)
            return x + gd.run()
    (g, u), _, _ = _project(x, norm_w, epsilon, (wg, wu), mode)
    if g.shape[0] == 1 and act == "silu_ggml":
        f = np.empty(g.shape, np.float32)
        if _all_simd((wd,), 1, mode):
            return x + _simd_products(*swiglu_quant8(g, u, f), (wd,), f)
        fq, fst = swiglu_quant(g, u, f)
        if _all_int8((wd,), 1, mode):
            return x + qmatmul_q(fq, fst, wd, np.empty((1, wd.shape[0]), np.float32))
        return x + q_matmul(f, wd, mode=mode)
    f = gated_act(np.ascontiguousarray(g), np.ascontiguousarray(u), act=act)
    return x + q_matmul(f, wd, mode=mode)


@op("NormQMatMul", 1, domain=D)
def norm_qmatmul(
    x: np.ndarray, norm_w: np.ndarray, w: Any, *, epsilon: float = 1e-5, mode: str = "auto"
) -> np.ndarray:
    """RMSNorm then a matmul (the output head): (T, D) f32 -> (T, N) f32."""
    if x.shape[0] == 1:
        g = _dot((w,), mode)
        if g is not None:  # the logits leave the op: a fresh array, not g.y
            norm_quant_into(_f32(x), norm_w, np.float32(epsilon), g.h, *g.q)
            return g.run(np.empty((1, w.shape[0]), np.float32))
    return _project(x, norm_w, epsilon, (w,), mode)[0][0]
