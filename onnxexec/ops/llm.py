"""Ops in the 'onnxexec' domain that GGUF LLM graphs need and ONNX lacks.

Activations are float32 (T, width) matrices; quantized weights are QWeight objects
prepared once at load (onnxexec.kernels.quant.qmatmul), float weights plain arrays.
The arithmetic follows ggml's CPU kernels (ggml/src/ggml-cpu/ops.cpp, vec.h) where
the order or precision of operations is visible in the results, so that logits track
llama.cpp's closely; each handler's docstring names the ggml function it mirrors.
"""

from __future__ import annotations

import math

import numpy as np

from onnxexec.kernels.attn.attention import kv_attention
from onnxexec.kernels.math.ggml_math import gelu_f16_table, rope_cache, rope_rotate, silu_mul
from onnxexec.kernels.math.ggml_math import rms_norm as ggml_rms_norm
from onnxexec.kernels.math.ggml_math import softcap as softcap_kernel
from onnxexec.kernels.quant.ggml_dot_f16 import ggml_dot_float
from onnxexec.kernels.quant.qmatmul import QWeight, qembedding, qmatmul
from onnxexec.kernels.quant.qtypes import F32
from onnxexec.ops.registry import op

D = "onnxexec"


def _rows(w: QWeight | np.ndarray) -> int:
    return int(w.shape[0])


@op("QEmbedding", 1, domain=D)
def q_embedding(ids: np.ndarray, w: QWeight | np.ndarray, *, scale: float = 1.0) -> np.ndarray:
    """(T,) int64 token ids -> (T, D) f32 rows of the (V, D) table, times `scale`
    (ggml_get_rows, then ggml_scale by the float32 scale for gemma)."""
    ids = np.asarray(ids).reshape(-1)
    rows = _rows(w)
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise ValueError(f"token id out of range [0, {rows}): {int(ids.min())}..{int(ids.max())}")
    x = qembedding(w, ids) if isinstance(w, QWeight) else np.asarray(w[ids], dtype=np.float32)
    if scale != 1.0:
        x = x * np.float32(scale)
    return x


@op("QMatMul", 1, domain=D)
def q_matmul(
    x: np.ndarray, w: QWeight | np.ndarray, bias: np.ndarray | None = None, *, mode: str = "auto"
) -> np.ndarray:
    """(T, K) f32 @ (N, K)^T -> (T, N) f32 (+ bias (N,)); `mode` as qmatmul's
    ("int8" quantizes activations like llama.cpp at every T)."""
    if isinstance(w, QWeight):
        y = qmatmul(x, w, mode=mode)
    elif mode == "int8" and w.dtype == np.float32:  # F32 matrix: llama.cpp's order (F4)
        xc = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty((xc.shape[0], w.shape[0]), np.float32)
        ggml_dot_float(np.ascontiguousarray(w), F32, xc, y)
    else:
        y = np.matmul(x, w.T)
    if bias is not None:
        y += bias
    return y


@op("RMSNorm", 1, domain=D)
def rms_norm(x: np.ndarray, w: np.ndarray, *, epsilon: float = 1e-5, group: int = 0) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis, or over each `group`-wide slice
    of it (per-head Q/K norm). (T, W) f32 -> (T, W) f32.

    As ggml_compute_forward_rms_norm_f32: squares in f32 summed in double in index
    order, the mean and 1/sqrt(mean + eps) in f32, then (x * scale) * w.
    """
    return ggml_rms_norm(x, w, epsilon, group)


@op("RoPE", 1, domain=D)
def rope(
    x: np.ndarray,
    pos: np.ndarray,
    *,
    head_dim: int,
    n_dims: int = 0,
    base: float = 10000.0,
    freq_scale: float = 1.0,
    style: str = "norm",
) -> np.ndarray:
    """Rotary embedding of (T, H*Dh) f32 at positions pos..pos+T-1.

    style 'norm' rotates adjacent pairs (x[2i], x[2i+1]) (GGUF llama: Q/K rows were
    permuted at conversion for this), 'neox' rotates (x[i], x[i + n/2]); dims >= n_dims
    pass through. Angles theta_i = freq_scale * p * base^(-2i/n_dims), computed and
    applied with ggml's rounding (kernels/math/ggml_math.py).
    """
    if style not in ("norm", "neox"):
        raise ValueError(f"unknown RoPE style '{style}'")
    n_dims = n_dims or head_dim
    if n_dims % 2 or n_dims > head_dim or x.shape[-1] % head_dim:
        raise ValueError(
            f"RoPE: n_dims {n_dims} must be even and <= head_dim {head_dim}, "
            f"width {x.shape[-1]} a multiple of head_dim"
        )
    cos, sin = rope_cache(int(pos), x.shape[0], n_dims, base, freq_scale)
    return rope_rotate(x, cos, sin, head_dim, n_dims, style == "neox")


def _to_f16(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float16).astype(np.float32)


@op("KVAttention", 1, domain=D)
def kv_attention_op(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: np.ndarray,
    *,
    head_dim: int,
    scale: float = 0.0,
    q_scale: float = 1.0,
    window: int = 0,
    softcap: float = 0.0,
    kv_f16: int = 0,
) -> np.ndarray:
    """Write k, v (T, Hkv*Dh) into the (C, Hkv, Dh) caches at pos (in place: the caches
    are the model's preallocated buffers), then attend q (T, H*Dh) over [0, pos+T).

    q is first multiplied by q_scale (gemma3 scales Q before attention), the scores by
    `scale` (default 1/sqrt(Dh)). kv_f16=1 stores k/v rounded to half precision and
    computes the rest as ggml does with llama.cpp's default F16 KV cache, bit for bit
    (kernels/attn/attention.py).
    """
    p = int(pos)
    T = q.shape[0]
    if q_scale != 1.0:
        q = q * np.float32(q_scale)
    k = k.reshape(T, -1, head_dim)
    v = v.reshape(T, -1, head_dim)
    k_cache[p : p + T] = _to_f16(k) if kv_f16 else k
    v_cache[p : p + T] = _to_f16(v) if kv_f16 else v
    return kv_attention(
        q,
        k_cache,
        v_cache,
        p,
        scale or 1.0 / math.sqrt(head_dim),
        window,
        softcap,
        ggml=bool(kv_f16),
    )


def gelu_tanh(x: np.ndarray, f16_table: bool) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in float32; with f16_table, as
    ggml's CPU default (GGML_GELU_FP16): look up the half-rounded x in a half table,
    0 for x <= -10 and x for x >= 10 (ggml_vec_geglu_f32)."""
    if f16_table:
        y = gelu_f16_table()[x.astype(np.float16).view(np.uint16)]
        return np.where(x <= -10.0, np.float32(0.0), np.where(x >= 10.0, x, y))
    c = np.float32(math.sqrt(2.0 / math.pi))
    return (
        np.float32(0.5)
        * x
        * (np.float32(1.0) + np.tanh(c * x * (np.float32(1.0) + np.float32(0.044715) * x * x)))
    )


@op("GatedAct", 1, domain=D)
def gated_act(gate: np.ndarray, up: np.ndarray, *, act: str = "silu") -> np.ndarray:
    """act(gate) * up: SwiGLU ('silu'), GeGLU with tanh-GELU ('gelu_tanh'), and their
    ggml renderings: 'silu_ggml' (ggml_v_expf, float32 division) and 'gelu_tanh_f16'
    (ggml's half-precision GELU table)."""
    if act == "silu":
        return gate / (np.float32(1.0) + np.exp(-gate)) * up
    if act == "silu_ggml":
        return silu_mul(gate, up)
    if act in ("gelu_tanh", "gelu_tanh_f16"):
        return gelu_tanh(gate, act == "gelu_tanh_f16") * up
    raise ValueError(f"unknown gated activation '{act}'")


@op("Softcap", 1, domain=D)
def softcap(x: np.ndarray, *, cap: float) -> np.ndarray:
    """cap * tanh(x * (1/cap)) (gemma final-logit soft capping: scale, tanh, scale)."""
    return softcap_kernel(x, cap)


@op("LastRow", 1, domain=D)
def last_row(x: np.ndarray) -> np.ndarray:
    """(T, W) -> (1, W): only the last position's hidden state feeds the output head."""
    return x[-1:]
