"""onnxexec::FusedLayerNorm and onnxexec::FusedRMSNorm over the last axis, with an
optional residual ("skip") added first and returned as a second output, like
onnxruntime's SkipLayerNormalization / SkipSimplifiedLayerNormalization (graph passes
fuse_layernorm, fuse_rmsnorm, fuse_skip_norm).
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.math.norms import layer_norm, layer_norm_reference
from onnxexec.ops.registry import op

D = "onnxexec"
F32 = np.dtype(np.float32)


def _last_axis(v: np.ndarray | None, d: int) -> np.ndarray | None:
    """A scale / bias broadcast to the kernel's (D,): LayerNormalization allows any shape
    that broadcasts to the normalized axis, such as [1]."""
    return v if v is None or v.shape == (d,) else np.broadcast_to(v, (d,))


def _norm(x, scale, bias, skip, skip_bias, epsilon, rms, outputs_used):
    keep = len(outputs_used) > 1 and outputs_used[1]
    if x.dtype == F32 and x.ndim >= 1 and x.shape[-1] > 0:
        d = x.shape[-1]
        scale, bias, skip_bias = (_last_axis(v, d) for v in (scale, bias, skip_bias))
        y, s = layer_norm(x, scale, bias, skip, skip_bias, epsilon, rms, keep)
        return y, s
    s = x if skip is None else x + skip
    if skip_bias is not None:
        s = s + skip_bias
    y = layer_norm_reference(s, scale, bias, None, None, epsilon, rms).astype(x.dtype)
    return y, (np.asarray(s, dtype=x.dtype) if keep else None)


@op("FusedLayerNorm", 1, domain=D, wants=("outputs_used",))
def fused_layer_norm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    skip: np.ndarray | None = None,
    skip_bias: np.ndarray | None = None,
    *,
    epsilon: float = 1e-5,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """s = X + skip + skip_bias; Y = (s - mean) / sqrt(var + eps) * scale + bias; (Y, s)."""
    return _norm(x, scale, bias, skip, skip_bias, epsilon, False, outputs_used)


@op("FusedRMSNorm", 1, domain=D, wants=("outputs_used",))
def fused_rms_norm(
    x: np.ndarray,
    scale: np.ndarray,
    skip: np.ndarray | None = None,
    *,
    epsilon: float = 1e-6,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple:
    """s = X + skip; Y = s / sqrt(mean(s^2) + eps) * scale; (Y, s)."""
    return _norm(x, scale, None, skip, None, epsilon, True, outputs_used)
