"""onnxexec::FusedRotary: rotary position embedding, rotate-half form (graph pass
fuse_rope), Y = X * cos + concat(-X[..., D/2:], X[..., :D/2]) * sin."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.attn.rope import rope, rope_reference
from onnxexec.ops.registry import op

F32 = np.dtype(np.float32)


@op("FusedRotary", 1, domain="onnxexec")
def fused_rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """X (..., D) with D even; cos / sin broadcastable to X (numpy rules)."""
    if x.dtype == F32 and cos.dtype == F32 and sin.dtype == F32 and x.ndim == 4 and x.size:
        shape = np.broadcast_shapes(x.shape, cos.shape, sin.shape)
        if shape == x.shape and x.shape[-1] % 2 == 0:
            return rope(x, cos, sin)
    return rope_reference(x, cos, sin)
