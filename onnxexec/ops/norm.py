"""Normalizations: Batch/Instance/Layer/Group/RMS normalization, LpNormalization,
MeanVarianceNormalization, LRN.

Statistics are computed in float32 (float64 for float64 inputs): the spec's
stash_type=1 default, and what onnxruntime does for float16 inputs.
"""

from __future__ import annotations

import math

import numpy as np

from onnxexec.ops.common import norm_axes, norm_axis
from onnxexec.ops.registry import op

Arr = np.ndarray
BnOut = np.ndarray | tuple[np.ndarray, ...]


def _f(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def _channel(v: np.ndarray, rank: int, dt: np.dtype) -> np.ndarray:
    """A per-channel (C,) parameter shaped to broadcast over (N, C, D...)."""
    return v.astype(dt, copy=False).reshape((1, -1) + (1,) * (rank - 2))


# --- BatchNormalization ---


def _bn_infer(x, scale, b, mean, var, epsilon, spatial=1):
    """y = scale * (x - mean) / sqrt(var + epsilon) + B, parameters per channel
    (spatial=1) or per activation, i.e. shaped like x[0] (spatial=0)."""
    dt = _f(x.dtype)
    if spatial:
        sh = (1, -1) + (1,) * (x.ndim - 2)
    else:
        sh = (1, *x.shape[1:])
    p = [v.astype(dt, copy=False).reshape(sh) for v in (scale, b, mean, var)]
    y = (x.astype(dt, copy=False) - p[2]) / np.sqrt(p[3] + dt.type(epsilon)) * p[0] + p[1]
    return y.astype(x.dtype, copy=False)


def _bn_train(x, scale, b, mean, var, epsilon, momentum, spatial=1):
    """Normalize with the batch statistics (biased variance, as onnx's reference);
    running stats = old * momentum + batch * (1 - momentum)."""
    dt = _f(x.dtype)
    axes = (0, *range(2, x.ndim)) if spatial else (0,)
    xf = x.astype(dt, copy=False)
    bmean = xf.mean(axis=axes)
    bvar = xf.var(axis=axes)
    if not spatial:
        bmean, bvar = bmean.reshape(mean.shape), bvar.reshape(var.shape)
    y = _bn_infer(x, scale, b, bmean, bvar, epsilon, spatial)
    m = dt.type(momentum)
    run_mean = (mean.astype(dt) * m + bmean.reshape(mean.shape) * (1 - m)).astype(mean.dtype)
    run_var = (var.astype(dt) * m + bvar.reshape(var.shape) * (1 - m)).astype(var.dtype)
    return y, run_mean, run_var, bmean.astype(mean.dtype), bvar.astype(var.dtype)


@op("BatchNormalization", since=14)
def batch_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    b: np.ndarray,
    input_mean: np.ndarray,
    input_var: np.ndarray,
    *,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    training_mode: int = 0,
) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (N, C, D...), per-channel (C,) params -> Y, [running_mean, running_var] (C,)."""
    if not training_mode:
        return _bn_infer(x, scale, b, input_mean, input_var, epsilon)
    y, rm, rv, _, _ = _bn_train(x, scale, b, input_mean, input_var, epsilon, momentum)
    return y, rm, rv


def _bn_old(
    x: Arr,
    scale: Arr,
    b: Arr,
    mean: Arr,
    var: Arr,
    epsilon: float,
    momentum: float,
    spatial: int,
    num_outputs: int,
) -> BnOut:
    """Opsets 1-13: training (batch statistics) only when the node asks for the
    extra outputs; a lone Y is inference, whatever is_test says (as onnxruntime)."""
    if num_outputs <= 1:
        return _bn_infer(x, scale, b, mean, var, epsilon, spatial)
    return _bn_train(x, scale, b, mean, var, epsilon, momentum, spatial)[:num_outputs]


@op("BatchNormalization", since=9, wants=("num_outputs",))
def batch_normalization_v9(
    x: Arr,
    scale: Arr,
    b: Arr,
    mean: Arr,
    var: Arr,
    *,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    num_outputs: int = 1,
) -> BnOut:
    return _bn_old(x, scale, b, mean, var, epsilon, momentum, 1, num_outputs)


@op("BatchNormalization", since=7, wants=("num_outputs",))
def batch_normalization_v7(
    x: Arr,
    scale: Arr,
    b: Arr,
    mean: Arr,
    var: Arr,
    *,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    spatial: int = 1,
    num_outputs: int = 1,
) -> BnOut:
    return _bn_old(x, scale, b, mean, var, epsilon, momentum, spatial, num_outputs)


@op("BatchNormalization", since=6, wants=("num_outputs",))
def batch_normalization_v6(
    x: Arr,
    scale: Arr,
    b: Arr,
    mean: Arr,
    var: Arr,
    *,
    epsilon: float = 1e-5,
    is_test: int = 0,
    momentum: float = 0.9,
    spatial: int = 1,
    num_outputs: int = 1,
) -> BnOut:
    return _bn_old(x, scale, b, mean, var, epsilon, momentum, spatial, num_outputs)


@op("BatchNormalization", since=1, wants=("num_outputs",))
def batch_normalization_v1(
    x: Arr,
    scale: Arr,
    b: Arr,
    mean: Arr,
    var: Arr,
    *,
    consumed_inputs: tuple[int, ...],
    epsilon: float = 1e-5,
    is_test: int = 0,
    momentum: float = 0.9,
    spatial: int = 1,
    num_outputs: int = 1,
) -> BnOut:
    """Opset 1: consumed_inputs is a legacy in-place hint with no effect on values."""
    return _bn_old(x, scale, b, mean, var, epsilon, momentum, spatial, num_outputs)


# --- Instance / Layer / Group / RMS ---


@op("InstanceNormalization", since=6)
def instance_normalization(
    x: np.ndarray, scale: np.ndarray, b: np.ndarray, *, epsilon: float = 1e-5
) -> np.ndarray:
    """X (N, C, D...), scale/B (C,): normalize each (n, c) over its spatial positions."""
    dt = _f(x.dtype)
    xf = x.astype(dt, copy=False)
    axes = tuple(range(2, x.ndim))
    mean = xf.mean(axis=axes, keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (xf - mean) / np.sqrt(var + dt.type(epsilon))
    y = y * _channel(scale, x.ndim, dt) + _channel(b, x.ndim, dt)
    return y.astype(x.dtype, copy=False)


@op("InstanceNormalization", since=1)
def instance_normalization_v1(
    x: Arr,
    scale: Arr,
    b: Arr,
    *,
    consumed_inputs: tuple[int, ...] | None = None,
    epsilon: float = 1e-5,
) -> Arr:
    return instance_normalization(x, scale, b, epsilon=epsilon)


def _stash(x: np.ndarray, stash_type: int) -> np.dtype:
    """stash_type 1 = float32 statistics (float64 inputs keep float64)."""
    return _f(x.dtype) if stash_type == 1 else x.dtype


@op("LayerNormalization", since=17)
def layer_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    b: np.ndarray | None = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalize over axes [axis, rank): Y like X; Mean, InvStdDev (D0..D(axis-1), 1...)."""
    a = norm_axis(axis, x.ndim, "LayerNormalization")
    dt = _stash(x, stash_type)
    xf = x.astype(dt, copy=False)
    axes = tuple(range(a, x.ndim))
    mean = xf.mean(axis=axes, keepdims=True)
    diff = xf - mean
    inv_std = 1.0 / np.sqrt((diff * diff).mean(axis=axes, keepdims=True) + dt.type(epsilon))
    y = diff * inv_std * scale.astype(dt, copy=False)
    if b is not None:
        y = y + b.astype(dt, copy=False)
    stat_dt = dt if stash_type == 1 else x.dtype
    return y.astype(x.dtype, copy=False), mean.astype(stat_dt), inv_std.astype(stat_dt)


@op("LayerNormalization", since=1)
def layer_normalization_v1(
    x: np.ndarray,
    scale: np.ndarray,
    b: np.ndarray | None = None,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """onnxruntime's contrib LayerNormalization-1 (its optimizer fuses it at any opset;
    onnx's own starts at 17 with the same inputs, attributes and results)."""
    return layer_normalization(x, scale, b, axis=axis, epsilon=epsilon, stash_type=stash_type)


@op("RMSNormalization", since=23)
def rms_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: int = 1,
) -> np.ndarray:
    """Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale."""
    a = norm_axis(axis, x.ndim, "RMSNormalization")
    dt = _stash(x, stash_type)
    xf = x.astype(dt, copy=False)
    ms = (xf * xf).mean(axis=tuple(range(a, x.ndim)), keepdims=True)
    y = xf / np.sqrt(ms + dt.type(epsilon)) * scale.astype(dt, copy=False)
    return y.astype(x.dtype, copy=False)


def _group_norm(x, scale, bias, num_groups, epsilon, dt, per_channel):
    n, c = x.shape[:2]
    # Explicit group size: reshape(..., -1) cannot infer it when N == 0.
    group_size = c // num_groups * math.prod(x.shape[2:])
    xg = x.astype(dt, copy=False).reshape(n, num_groups, group_size)
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + dt.type(epsilon))).reshape(x.shape)
    if per_channel:
        s, b = _channel(scale, x.ndim, dt), _channel(bias, x.ndim, dt)
    else:  # (G,) parameters: repeat each over its C/G channels
        s = _channel(np.repeat(scale, c // num_groups), x.ndim, dt)
        b = _channel(np.repeat(bias, c // num_groups), x.ndim, dt)
    return (y * s + b).astype(x.dtype, copy=False)


@op("GroupNormalization", since=21)
def group_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    *,
    epsilon: float = 1e-5,
    num_groups: int,
    stash_type: int = 1,
) -> np.ndarray:
    """X (N, C, D...), scale/bias (C,): normalize over each group of C/G channels."""
    return _group_norm(x, scale, bias, num_groups, epsilon, _stash(x, stash_type), True)


@op("GroupNormalization", since=18)
def group_normalization_v18(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    *,
    epsilon: float = 1e-5,
    num_groups: int,
) -> np.ndarray:
    """Opset 18 (deprecated): scale and bias are per *group*, shape (G,)."""
    return _group_norm(x, scale, bias, num_groups, epsilon, _f(x.dtype), False)


# --- LpNormalization, MVN, LRN ---


@op("LpNormalization", since=1)
def lp_normalization(x: np.ndarray, *, axis: int = -1, p: int = 2) -> np.ndarray:
    """x / ||x||_p along axis (p is 1 or 2); zero vectors stay zero."""
    a = norm_axis(axis, x.ndim, "LpNormalization")
    dt = _f(x.dtype)
    xf = x.astype(dt, copy=False)
    if p == 1:
        norm = np.abs(xf).sum(axis=a, keepdims=True)
    elif p == 2:
        norm = np.sqrt((xf * xf).sum(axis=a, keepdims=True))
    else:
        raise ValueError(f"LpNormalization: p must be 1 or 2, got {p}")
    safe = np.where(norm == 0, 1, norm)
    return np.where(norm == 0, 0, xf / safe).astype(x.dtype, copy=False)


@op("MeanVarianceNormalization", since=9)
def mean_variance_normalization(x: np.ndarray, *, axes: tuple[int, ...] = (0, 2, 3)) -> np.ndarray:
    """(X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over `axes` (the spec's function body)."""
    ax = norm_axes(axes, x.ndim, "MeanVarianceNormalization")
    dt = _f(x.dtype)
    xf = x.astype(dt, copy=False)
    mean = xf.mean(axis=ax, keepdims=True)
    var = (xf * xf).mean(axis=ax, keepdims=True) - mean * mean
    y = (xf - mean) / (np.sqrt(var) + dt.type(1e-9))
    return y.astype(x.dtype, copy=False)


@op("LRN", since=1)
def lrn(
    x: np.ndarray,
    *,
    alpha: float = 1e-4,
    beta: float = 0.75,
    bias: float = 1.0,
    size: int,
) -> np.ndarray:
    """X (N, C, D...): x / (bias + alpha / size * square_sum) ** beta, where square_sum
    runs over channels [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    dt = _f(x.dtype)
    xf = x.astype(dt, copy=False)
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = np.pad(xf * xf, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    square_sum = sq[:, :c].copy()
    for k in range(1, size):
        square_sum += sq[:, k : k + c]
    y = xf / (dt.type(bias) + dt.type(alpha / size) * square_sum) ** dt.type(beta)
    return y.astype(x.dtype, copy=False)
