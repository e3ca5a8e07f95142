"""onnxexec::FusedAttention: softmax(Q K^T * scale + mask) V in one op (graph pass
fuse_attention), with grouped-query heads and torch SDPA's NaN-to-zero option."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.attn.mha import attention, attention_reference
from onnxexec.ops.registry import op

F32 = np.dtype(np.float32)


@op("FusedAttention", 1, domain="onnxexec")
def fused_attention(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    scale: float = 1.0,
    nan_to_zero: int = 0,
) -> np.ndarray:
    """Q (B, H, T, Dh), K^T (B, Hkv, Dh, S), V (B, Hkv, S, Dv), additive mask broadcastable
    to (B, H, T, S) -> (B, H, T, Dv); H a multiple of Hkv (query head h uses kv head
    h // (H / Hkv)). Rows with every score -inf give NaN, or 0 with nan_to_zero."""
    if q.ndim != 4 or kt.ndim != 4 or v.ndim != 4:
        raise ValueError(
            f"FusedAttention: rank-4 Q, K^T, V expected, got {q.ndim}, {kt.ndim}, {v.ndim}"
        )
    b, h, t, _ = q.shape
    full = (b, h, t, kt.shape[3])
    if (
        kt.shape[0] != b
        or v.shape[0] != b
        or h % kt.shape[1]
        or (mask is not None and np.broadcast_shapes(full, mask.shape) != full)
    ):
        # Shapes the kernel does not take (the pass fuses dims it could not prove, see
        # fuse_attention._keeps_shape): the graph's numpy broadcasting, in float64.
        return attention_reference(q, kt, v, mask, scale, bool(nan_to_zero)).astype(q.dtype)
    if (
        q.dtype == F32
        and kt.dtype == F32
        and v.dtype == F32
        and (mask is None or mask.dtype.kind == "f")
    ):
        return attention(q, kt, v, mask, scale, bool(nan_to_zero))
    out = attention_reference(q, kt, v, mask, scale, bool(nan_to_zero))
    return out.astype(q.dtype)
