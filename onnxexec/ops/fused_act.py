"""onnxexec::FusedGelu: GELU (erf or tanh form) with an optional bias added first
(graph pass fuse_gelu: the decomposed forms exporters emit, Gelu-20, bias + Gelu)."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.math.activations import epilogue, epilogue_reference
from onnxexec.ops.registry import op

F32 = np.dtype(np.float32)


@op("FusedGelu", 1, domain="onnxexec")
def fused_gelu(
    x: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    approximate: str = "none",
    product_first: int = 0,
) -> np.ndarray:
    """Gelu(X + bias); approximate 'none' (erf) or 'tanh'; bias (D,) on the last axis.

    product_first: the matched graph rounds x * (1 + erf(.)) before halving it, so the
    result is inf where that product overflows (x > float32 max / 2), as there."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"FusedGelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    code = ACT["Gelu" if approximate == "none" else "GeluTanh"]
    a = float(bool(product_first))
    d = x.shape[-1] if x.ndim else 0
    vec = bias is None or (bias.dtype == F32 and bias.shape == (d,))  # what the kernel reads
    if x.dtype == F32 and x.ndim >= 1 and x.size and vec:
        y = np.array(x, dtype=np.float32, order="C")
        epilogue(y.reshape(-1, d), 0, d, bias, code, a)
        return y
    if x.dtype == F32 and x.size and bias is not None and bias.dtype == F32:
        return fused_gelu(x + bias, approximate=approximate, product_first=product_first)
    return epilogue_reference(x if bias is None else x + bias, None, code, a)
