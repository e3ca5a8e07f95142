"""com.microsoft FusedMatMul and FusedConv, the fusions onnxruntime's graph optimizer
saves at its extended level (docs/ContribOperators.md), on the kernels of
onnxexec::FusedMatMul / onnxexec::FusedConv."""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.fused_linear import fused_conv as _onnxexec_fused_conv
from onnxexec.ops.fused_linear import fused_matmul as _onnxexec_fused_matmul
from onnxexec.ops.registry import op


def _operand(x: np.ndarray, trans: int, trans_batch: int) -> np.ndarray:
    """A / B as FusedMatMul multiplies it: transBatch moves axis 0 behind the other batch
    axes ((d0, d1, .., M, K) -> (d1, .., d0, M, K)... onnxruntime's
    TransposeMatMul fusion of Transpose perm [1, .., r-2, 0, r-1]), trans swaps the last
    two axes."""
    r = x.ndim
    if trans_batch and r >= 3:
        x = x.transpose(*range(1, r - 1), 0, r - 1)
    if trans and r >= 2:
        x = np.swapaxes(x, -1, -2)
    return x


@op("FusedMatMul", 1, domain=MS_DOMAIN)
def fused_matmul(
    a: np.ndarray,
    b: np.ndarray,
    *,
    alpha: float = 1.0,
    transA: int = 0,
    transB: int = 0,
    transBatchA: int = 0,
    transBatchB: int = 0,
) -> np.ndarray:
    """Y = alpha * A' @ B' (numpy matmul broadcasting), A' / B' per transA / transBatchA."""
    a2 = _operand(a, transA, transBatchA)
    if transBatchB or b.ndim < 2:
        y = np.matmul(a2, _operand(b, transB, transBatchB))
    else:  # B transposed by the kernel itself: (K, N) weights stay packed as stored
        y = _onnxexec_fused_matmul(np.ascontiguousarray(a2), b, transB=transB)
    if alpha != 1.0:
        y = y * y.dtype.type(alpha)
    return y.astype(a.dtype, copy=False)


# onnxruntime's activation names -> how many activation_params each reads
_ACTIVATIONS = {
    "": 0,
    "Relu": 0,
    "Sigmoid": 0,
    "Tanh": 0,
    "LeakyRelu": 1,
    "Clip": 2,
    "HardSigmoid": 2,
}


@op("FusedConv", 1, domain=MS_DOMAIN)
def fused_conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    z: np.ndarray | None = None,
    *,
    activation: str = "",
    activation_params: tuple[float, ...] = (),
    auto_pad: str = "NOTSET",
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Y = activation(Conv(X, W, B) + Z) with Conv's attributes; activation_params are
    LeakyRelu's alpha, Clip's (min, max), HardSigmoid's (alpha, beta)."""
    if activation not in _ACTIVATIONS or len(activation_params) < _ACTIVATIONS[activation]:
        raise ValueError(
            f"FusedConv: activation {activation!r} with params {list(activation_params)} is "
            f"not one of {sorted(a for a in _ACTIVATIONS if a)} with its parameters"
        )
    params = (*activation_params, 0.0, 0.0)
    return _onnxexec_fused_conv(
        x,
        w,
        b,
        z,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
        activation=activation,
        alpha=float(params[0]),
        beta=float(params[1]),
    )
