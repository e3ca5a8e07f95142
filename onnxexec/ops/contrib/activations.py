"""com.microsoft activations: Gelu, BiasGelu, FastGelu, QuickGelu, BiasSplitGelu,
BiasAdd, BiasSoftmax (onnxruntime docs/ContribOperators.md). The GELU forms run on the
fused epilogue kernel of onnxexec::FusedGelu."""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.fused_act import fused_gelu
from onnxexec.ops.registry import op


@op("Gelu", 1, domain=MS_DOMAIN)
def gelu(x: np.ndarray) -> np.ndarray:
    """Y = 0.5 X (1 + erf(X / sqrt(2))), Y like X."""
    return fused_gelu(x)


@op("BiasGelu", 1, domain=MS_DOMAIN)
def bias_gelu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C = Gelu(A + B), B (D,) on the last axis of A (erf form)."""
    return fused_gelu(a, b)


@op("FastGelu", 1, domain=MS_DOMAIN)
def fast_gelu(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """Y = tanh-form Gelu of X + bias: 0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))."""
    return fused_gelu(x, bias, approximate="tanh")


@op("QuickGelu", 1, domain=MS_DOMAIN)
def quick_gelu(x: np.ndarray, *, alpha: float = 1.702) -> np.ndarray:
    """Y = X * sigmoid(alpha * X), Y like X."""
    a = x.dtype.type(alpha)
    with np.errstate(over="ignore"):  # exp overflow gives sigmoid 0, as onnxruntime's
        return (x / (1 + np.exp(-a * x))).astype(x.dtype, copy=False)


@op("BiasSplitGelu", 1, domain=MS_DOMAIN)
def bias_split_gelu(x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """X (B, T, 2C), bias (2C,) -> (B, T, C): left * Gelu(right) of X + bias split in two."""
    y = x + bias
    c = y.shape[-1] // 2
    return (y[..., :c] * fused_gelu(np.ascontiguousarray(y[..., c:]))).astype(x.dtype)


@op("BiasAdd", 1, domain=MS_DOMAIN)
def bias_add(x: np.ndarray, bias: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """X (B, T, C) + bias (C,) + skip (B, T, C)."""
    return x + bias + skip


@op("BiasSoftmax", 1, domain=MS_DOMAIN)
def bias_softmax(
    data: np.ndarray, bias: np.ndarray, *, axis: int = 1, is_inner_broadcast: int
) -> np.ndarray:
    """softmax(data + bias) over axes [axis, rank) flattened, as onnxruntime's kernel
    (it views data as (outer, inner) at `axis`); bias broadcasts to data.

    is_inner_broadcast only says which way bias broadcasts (over the inner or the
    outer dimensions of data); numpy's broadcasting covers both."""
    s = data + bias
    a = axis + s.ndim if axis < 0 else axis
    rows = s.reshape(int(np.prod(s.shape[:a], dtype=np.int64)), -1)
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(s.shape).astype(data.dtype, copy=False)
