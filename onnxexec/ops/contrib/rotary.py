"""com.microsoft RotaryEmbedding (docs/ContribOperators.md; contrib_ops/cpu/bert/
rotary_embedding.cc) and the rotation GroupQueryAttention's do_rotary applies."""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.registry import op


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: int) -> np.ndarray:
    """x (B, N, S, H) rotated on its first 2 * cos.shape[-1] features by cos / sin
    (B|1, 1, S, R/2); interleaved pairs (2i, 2i+1), else halves (i, i + R/2)."""
    half = cos.shape[-1]
    out = x.copy()
    if interleaved:
        x1, x2 = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]
        out[..., 0 : 2 * half : 2] = x1 * cos - x2 * sin
        out[..., 1 : 2 * half : 2] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., :half], x[..., half : 2 * half]
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half : 2 * half] = x2 * cos + x1 * sin
    return out


def cos_sin(cos_cache, sin_cache, positions):
    """(B, 1, S, R/2) cos / sin rows at `positions` (B, S), checked against the cache."""
    if positions.size and (positions.min() < 0 or positions.max() >= cos_cache.shape[0]):
        raise IndexError(
            f"rotary position {int(positions.max())} outside the cos/sin cache of "
            f"{cos_cache.shape[0]} rows"
        )
    return cos_cache[positions][:, None], sin_cache[positions][:, None]


@op("RotaryEmbedding", 1, domain=MS_DOMAIN)
def rotary_embedding(
    x: np.ndarray,
    position_ids: np.ndarray,
    cos_cache: np.ndarray,
    sin_cache: np.ndarray,
    *,
    interleaved: int = 0,
    is_packed_batching: int = 0,
    num_heads: int = 0,
    rotary_embedding_dim: int = 0,
    scale: float = 1.0,
) -> np.ndarray:
    """input (B, S, N*H) or (B, N, S, H); position_ids (B, S), or one offset p giving
    positions p..p+S-1; cos_cache / sin_cache (max_position, R/2). Y like input; the
    features past R pass through. `scale` is unused, as in onnxruntime's CPU kernel."""
    if is_packed_batching:
        raise NotImplementedError("RotaryEmbedding: is_packed_batching=1 is not supported")
    half = cos_cache.shape[1]
    if x.ndim == 4:
        b, n, s, h = x.shape
        xs = x
    else:
        b, s, d = x.shape
        if rotary_embedding_dim and not num_heads:
            raise ValueError("RotaryEmbedding: rotary_embedding_dim on 3-D input needs num_heads")
        h = d // num_heads if num_heads else 2 * half
        n = d // h
        xs = x.reshape(b, s, n, h).transpose(0, 2, 1, 3)
    if rotary_embedding_dim:
        half = rotary_embedding_dim // 2
    pos = np.asarray(position_ids, dtype=np.int64)
    pos = (pos.reshape(-1)[0] + np.arange(s))[None] if pos.size == 1 else pos
    cos, sin = cos_sin(cos_cache[:, :half], sin_cache[:, :half], np.broadcast_to(pos, (b, s)))
    y = rotate(xs, cos.astype(x.dtype), sin.astype(x.dtype), interleaved)
    return y if x.ndim == 4 else y.transpose(0, 2, 1, 3).reshape(x.shape)
