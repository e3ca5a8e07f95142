"""com.microsoft QAttention (ContribOperators.md): Attention with an 8-bit input and
QKV weight.

QKV = (input - zi) @ (weight - zw) * (input_scale * weight_scale) + bias, exact integer
product then float32 scaling; the rest is com.microsoft Attention in float32: per head
softmax(Q K^T * scale + mask) V. `unidirectional` masks the future; `past`
(2, B, N, P, Dh) is prepended to K and V and returned extended as `present`. Padding-
masked scores get mask_filter_value added (not -inf), so a fully padded row is uniform
as in onnxruntime.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.contrib.quant_igemm import PackedInt8, fits, int8_matmul, packed_for, packer
from onnxexec.ops.contrib.quant_matmul import centered
from onnxexec.ops.registry import op


def key_mask(mask_index: np.ndarray | None, b: int, s: int, total: int) -> np.ndarray:
    """bool (B, S, total): True where a query may see a key; mask_index formats: (B,) key
    lengths, (2B,) end then start positions, (B, total) or (B, S, total) 0/1 masks."""
    allowed = np.ones((b, s, total), bool)
    if mask_index is None:
        return allowed
    m = np.asarray(mask_index)
    j = np.arange(total)
    if m.ndim == 1 and m.size == b:
        allowed &= (j[None, :] < m[:, None])[:, None, :]
    elif m.ndim == 1 and m.size == 2 * b:
        end, start = m[:b], m[b:]
        allowed &= ((j[None, :] < end[:, None]) & (j[None, :] >= start[:, None]))[:, None, :]
    elif m.ndim == 2:
        allowed &= (m != 0)[:, None, :]
    elif m.ndim == 3:
        allowed &= m != 0
    else:
        raise ValueError(f"QAttention: mask_index of shape {list(m.shape)} is not supported")
    return allowed


@op("QAttention", since=1, domain=MS_DOMAIN, prepare=packer(1, 7))
def qattention(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    input_scale: np.ndarray,
    weight_scale: np.ndarray,
    mask_index: np.ndarray | None = None,
    input_zero_point: np.ndarray | None = None,
    weight_zero_point: np.ndarray | None = None,
    past: np.ndarray | None = None,
    *,
    do_rotary: int = 0,
    mask_filter_value: float = -10000.0,
    num_heads: int,
    past_present_share_buffer: int = 0,
    scale: float = 0.0,
    unidirectional: int = 0,
    prepared: PackedInt8 | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """8-bit input (B, S, D_in), weight (D_in, 3D) -> output (B, S, D) f32, present."""
    if do_rotary:
        raise ValueError("QAttention: do_rotary is not supported")
    b, s, _ = x.shape
    zw = None if weight_zero_point is None else np.asarray(weight_zero_point)
    if fits(x, weight, input_zero_point, zw):  # the integer GEMM, weight packed once
        pw = packed_for(prepared, weight, weight_zero_point)
        acc = int8_matmul(x, pw, input_zero_point).astype(np.float32)
    else:
        acc = np.matmul(centered(x, input_zero_point), centered(weight, zw)).astype(np.float32)
    ws = np.asarray(weight_scale, np.float32)
    qkv = acc * (np.float32(np.asarray(input_scale).reshape(-1)[0]) * ws) + bias
    d = qkv.shape[-1] // 3
    dh = d // num_heads

    def heads(t: np.ndarray) -> np.ndarray:  # (B, S, D) -> (B, N, S, Dh)
        return t.reshape(b, s, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = (heads(t) for t in np.split(qkv, 3, axis=-1))
    p_len = 0
    if past is not None:
        p_len = past.shape[3]
        k = np.concatenate([past[0], k], axis=2)
        v = np.concatenate([past[1], v], axis=2)
    total = p_len + s
    sc = np.float32(scale) if scale else np.float32(1.0 / np.sqrt(dh))
    scores = np.matmul(q, k.transpose(0, 1, 3, 2)) * sc  # (B, N, S, total)
    # padding masks add mask_filter_value; the causal mask excludes the future outright
    # (onnxruntime's softmax runs over the first P + i + 1 keys only)
    scores = (
        scores
        + np.where(key_mask(mask_index, b, s, total), 0, np.float32(mask_filter_value))[:, None]
    )
    if unidirectional:
        future = np.arange(total)[None, :] > (p_len + np.arange(s))[:, None]
        scores = np.where(future, -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    out = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, s, d)
    return out.astype(np.float32), np.stack([k, v]).astype(np.float32)
