"""Causal grouped-query attention over a preallocated KV cache (numba).

Shapes: T new tokens at positions pos..pos+T-1; H query heads, Hkv cache heads,
Dh head size; the cache holds positions [0, pos+T). Masking follows llama.cpp's
(llama-hparams.h is_masked_swa, LLAMA_SWA_TYPE_STANDARD): query position p may
see cache position j when j <= p and, with a window W > 0, p - j < W.

Numerics follow ggml's CPU path without flash attention (llama-graph.cpp
build_attn_mha): scores = q . k (optionally soft-capped: cap * tanh(s / cap)), then
softmax(scale * scores) with the exponentials summed in float64
(ggml_vec_soft_max_f32), then probabilities @ V. With `f16=True` the operands are
rounded to half precision where ggml converts them: llama.cpp's default KV cache is
F16, and ggml_mul_mat converts the f32 operand to the cache's vec_dot type, so q
(for q . k) and the probabilities (for p @ V) are rounded to f16 as well; sums stay
float32. The caller stores f16-rounded k/v in the cache.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from onnxexec.kernels.fp16 import round_to_f16


@nb.njit(parallel=True, cache=True, nogil=True)
def _attend(q, k_cache, v_cache, pos, scale, window, softcap, f16, out):
    """out[t, h*Dh:(h+1)*Dh] = softmax(scale * q_th . K^T) V over the visible cache rows.

    q (T, H*Dh) f32, k_cache/v_cache (C, Hkv, Dh) f32, out (T, H*Dh) f32.
    """
    T = q.shape[0]
    Hkv = k_cache.shape[1]
    Dh = k_cache.shape[2]
    H = q.shape[1] // Dh
    group = H // Hkv
    n_kv = pos + T
    for th in nb.prange(T * H):  # each (t, h) writes its own slice of out: no races
        t = th // H
        h = th % H
        hk = h // group
        p = pos + t
        lo = 0
        if window > 0 and p - window + 1 > 0:
            lo = p - window + 1
        hi = min(p + 1, n_kv)
        scores = np.empty(hi - lo, dtype=np.float32)
        qo = h * Dh
        qv = np.empty(Dh, dtype=np.float32)
        for d in range(Dh):
            qv[d] = round_to_f16(q[t, qo + d]) if f16 else q[t, qo + d]
        m = np.float32(-np.inf)
        for j in range(lo, hi):
            s = np.float32(0.0)
            for d in range(Dh):
                s += qv[d] * k_cache[j, hk, d]
            if softcap > 0.0:
                s = np.float32(softcap * math.tanh(s / softcap))
            s *= scale
            scores[j - lo] = s
            if s > m:
                m = s
        total = 0.0  # float64, as ggml_vec_soft_max_f32's ggml_float sum
        for j in range(hi - lo):
            e = np.float32(math.exp(scores[j] - m))
            scores[j] = e
            total += e
        inv = np.float32(1.0 / total)
        for j in range(hi - lo):
            w = scores[j] * inv
            scores[j] = round_to_f16(w) if f16 else w
        for d in range(Dh):
            out[t, qo + d] = 0.0
        for j in range(lo, hi):
            w = scores[j - lo]
            for d in range(Dh):
                out[t, qo + d] += w * v_cache[j, hk, d]


def kv_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, pos: int,
                 scale: float, window: int = 0, softcap: float = 0.0,
                 f16: bool = False) -> np.ndarray:
    """(T, H*Dh) f32 queries at positions pos.. over a (C, Hkv, Dh) cache -> (T, H*Dh)."""
    T, HD = q.shape
    C, Hkv, Dh = k_cache.shape
    if q.dtype != np.float32 or k_cache.dtype != np.float32 or v_cache.dtype != np.float32:
        raise ValueError("kv_attention expects float32 queries and caches")
    if HD % Dh or (HD // Dh) % Hkv:
        raise ValueError(f"query width {HD} is not a multiple of Hkv*Dh = {Hkv}*{Dh}")
    if pos < 0 or pos + T > C:
        raise ValueError(f"positions [{pos}, {pos + T}) exceed the KV cache size {C}")
    out = np.empty_like(q)
    _attend(np.ascontiguousarray(q), k_cache, v_cache, pos, np.float32(scale), window,
            np.float32(softcap), bool(f16), out)
    return out
