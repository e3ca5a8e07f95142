"""onnxexec::FusedGelu: GELU (erf or tanh form) with an optional bias added first
(graph pass fuse_gelu: the decomposed forms exporters emit, Gelu-20, bias + Gelu)."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.activations import ACT, epilogue, epilogue_reference
from onnxexec.ops.registry import op

F32 = np.dtype(np.float32)


@op("FusedGelu", 1, domain="onnxexec")
def fused_gelu(
    x: np.ndarray, bias: np.ndarray | None = None, *, approximate: str = "none"
) -> np.ndarray:
    """Gelu(X + bias); approximate 'none' (erf) or 'tanh'; bias (D,) on the last axis."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"FusedGelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    code = ACT["Gelu" if approximate == "none" else "GeluTanh"]
    if x.dtype == F32 and x.ndim >= 1 and x.size and (bias is None or bias.dtype == F32):
        y = np.array(x, dtype=np.float32, order="C")
        b = None if bias is None else np.ascontiguousarray(bias).reshape(-1)
        epilogue(y.reshape(-1, y.shape[-1]), 0, y.shape[-1], b, code)
        return y
    return epilogue_reference(x if bias is None else x + bias, None, code)
