"""com.microsoft QLinear* elementwise, pooling, concat and softmax ops, and its Q/DQ.

Semantics from onnxruntime's docs/ContribOperators.md; the arithmetic follows its CPU
kernels so results are exact or within one quantization step: elementwise ops with a
single quantized input go through a 256-entry lookup table built by dequantize -> f ->
quantize (onnxruntime's QlinearBuildLookupTable), binary ops apply the scale ratios
in float32 to the zero-point-shifted integers (MLAS QLinearAdd / QLinearMul).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxexec.ops import pool as _pool
from onnxexec.ops.common import norm_axis
from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.quant import dequantize, quantize
from onnxexec.ops.registry import op


def _scalar(a: np.ndarray | None, default: float = 0.0) -> np.float32:
    return np.float32(default if a is None else np.asarray(a).reshape(-1)[0])


def _zp(z: np.ndarray | None, dt: np.dtype) -> int:
    return 0 if z is None else int(np.asarray(z).reshape(-1)[0])


def _requant(real: np.ndarray, zp: int, dt: np.dtype) -> np.ndarray:
    """saturate(round_half_even(real) + zp) in dt (real already divided by the out scale)."""
    info = np.iinfo(dt)
    return np.clip(np.rint(real) + zp, info.min, info.max).astype(dt)


def _out_type(x: np.ndarray, zp: np.ndarray | None) -> np.dtype:
    return x.dtype if zp is None else np.asarray(zp).dtype


def _centred(x: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
    """float32 (x - zero point), exact for 8-bit codes."""
    return (x.astype(np.int32) - _zp(zp, x.dtype)).astype(np.float32)


def _output(real: np.ndarray, x: np.ndarray, y_zero_point: np.ndarray | None) -> np.ndarray:
    """`real` (already divided by Y's scale) requantized to Y's zero point and type (that
    of y_zero_point, else x's): the epilogue every QLinear op here shares."""
    out_dt = _out_type(x, y_zero_point)
    return _requant(real, _zp(y_zero_point, out_dt), out_dt)


def lookup(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None,
    fn: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """y = quantize(fn(dequantize(x))) through a table over every value of x's 8-bit type."""
    info = np.iinfo(x.dtype)
    codes = np.arange(info.min, info.max + 1, dtype=np.int32)
    real = (codes - _zp(x_zero_point, x.dtype)).astype(np.float32) * _scalar(x_scale)
    table = _output(fn(real) / _scalar(y_scale), x, y_zero_point)
    return table[x.astype(np.int32) - info.min]


@op("QLinearSigmoid", since=1, domain=MS_DOMAIN)
def qlinear_sigmoid(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
) -> np.ndarray:
    """u8/i8 X -> Y = quantize(sigmoid(dequantize(X))), same shape and type."""
    return lookup(
        x, x_scale, x_zero_point, y_scale, y_zero_point, lambda v: 1.0 / (1.0 + np.exp(-v))
    )


@op("QLinearLeakyRelu", since=1, domain=MS_DOMAIN)
def qlinear_leaky_relu(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    *,
    alpha: float = 0.01,
) -> np.ndarray:
    """u8/i8 X -> Y = quantize(leaky_relu(dequantize(X), alpha))."""
    a = np.float32(alpha)
    return lookup(
        x, x_scale, x_zero_point, y_scale, y_zero_point, lambda v: np.where(v < 0, v * a, v)
    )


def _binary(
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray | None,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray | None,
    c_scale: np.ndarray,
    c_zero_point: np.ndarray | None,
    combine: Callable[..., np.ndarray],
) -> np.ndarray:
    """QLinearAdd / QLinearMul: combine(A - za, B - zb, sa, sb, sc) in float32 (already
    in C's scale), requantized to C's zero point; numpy broadcasting."""
    real = combine(
        _centred(a, a_zero_point), _centred(b, b_zero_point),
        _scalar(a_scale), _scalar(b_scale), _scalar(c_scale),
    )  # fmt: skip
    return _output(real, a, c_zero_point)


def _add(da: np.ndarray, db: np.ndarray, sa: float, sb: float, sc: float) -> np.ndarray:
    return da * (sa / sc) + db * (sb / sc)


def _mul(da: np.ndarray, db: np.ndarray, sa: float, sb: float, sc: float) -> np.ndarray:
    return da * db * (sa * sb / sc)


@op("QLinearAdd", since=1, domain=MS_DOMAIN)
def qlinear_add(
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray | None,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray | None,
    c_scale: np.ndarray,
    c_zero_point: np.ndarray | None = None,
) -> np.ndarray:
    """C = quantize(dequantize(A) + dequantize(B)), numpy broadcasting.

    As MLAS: (A - za) * (sa / sc) + (B - zb) * (sb / sc) in float32, then round and add zc.
    """
    return _binary(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale, c_zero_point, _add)


@op("QLinearMul", since=1, domain=MS_DOMAIN)
def qlinear_mul(
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray | None,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray | None,
    c_scale: np.ndarray,
    c_zero_point: np.ndarray | None = None,
) -> np.ndarray:
    """C = quantize(dequantize(A) * dequantize(B)); (A - za)(B - zb) * (sa sb / sc) + zc."""
    return _binary(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale, c_zero_point, _mul)


@op("QLinearConcat", since=1, domain=MS_DOMAIN)
def qlinear_concat(
    y_scale: np.ndarray, y_zero_point: np.ndarray, *inputs: np.ndarray, axis: int
) -> np.ndarray:
    """Concat of (X, X_scale, X_zero_point) triples, each requantized to (Y_scale, Y_zp).

    An input already in the output's scale and zero point is copied unchanged.
    """
    if len(inputs) % 3:
        raise ValueError(f"QLinearConcat: {len(inputs)} inputs after Y's are not triples")
    out_dt = np.asarray(y_zero_point).dtype
    ys, yz = _scalar(y_scale), _zp(y_zero_point, out_dt)
    parts = []
    for x, s, z in zip(inputs[0::3], inputs[1::3], inputs[2::3], strict=True):
        if _scalar(s) == ys and _zp(z, x.dtype) == yz and x.dtype == out_dt:
            parts.append(x)
        else:
            parts.append(lookup(x, s, z, y_scale, y_zero_point, lambda v: v))
    return np.concatenate(parts, axis=norm_axis(axis, parts[0].ndim, "QLinearConcat"))


def _pooled(
    x: np.ndarray, channels_last: int, pooled: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Run an NCHW float pool on (x - zp) in float32, with NHWC input when channels_last."""
    if channels_last:
        perm = (0, x.ndim - 1, *range(1, x.ndim - 1))
        y = pooled(np.ascontiguousarray(x.transpose(perm)))
        return y.transpose((0, *range(2, x.ndim), 1))
    return pooled(x)


@op("QLinearAveragePool", since=1, domain=MS_DOMAIN)
def qlinear_average_pool(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    channels_last: int = 0,
    count_include_pad: int = 0,
    kernel_shape: tuple[int, ...],
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray:
    """AveragePool of the dequantized X, requantized: mean(X - zx) * sx / sy + zy."""
    xf = _centred(x, x_zero_point)

    def avg(v: np.ndarray) -> np.ndarray:
        g = _pool._geom(v, kernel_shape, strides, pads, auto_pad, None, ceil_mode)
        return _pool.average_pool_numpy(v, g, count_include_pad)

    mean = _pooled(xf, channels_last, avg)
    return _output(mean * (_scalar(x_scale) / _scalar(y_scale)), x, y_zero_point)


@op("QLinearGlobalAveragePool", since=1, domain=MS_DOMAIN)
def qlinear_global_average_pool(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
    *,
    channels_last: int = 0,
) -> np.ndarray:
    """(N, C, D...) or (N, D..., C) -> spatial dims 1: mean(X - zx) * sx / sy + zy.

    As onnxruntime: the window sum is exact int, the mean and scale ratio in float32.
    """
    spatial = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
    total = np.sum(x.astype(np.int64), axis=spatial, keepdims=True)
    count = int(np.prod([x.shape[a] for a in spatial]))
    centered = (total - count * _zp(x_zero_point, x.dtype)).astype(np.float32)
    ratio = _scalar(x_scale) / (_scalar(y_scale) * np.float32(count))
    return _output(centered * ratio, x, y_zero_point)


@op("QLinearSoftmax", since=1, domain=MS_DOMAIN)
def qlinear_softmax(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
    *,
    axis: int = -1,
    opset: int,
) -> np.ndarray:
    """Softmax of the dequantized X, requantized; `opset` < 13 flattens at `axis`
    (Softmax-1 semantics), >= 13 normalises along `axis` alone."""
    real = dequantize(x, np.asarray(x_scale, np.float32), x_zero_point).astype(np.float64)
    a = norm_axis(axis, x.ndim, "QLinearSoftmax")
    shape = x.shape
    if opset < 13:
        real = real.reshape(int(np.prod(shape[:a])), -1)
        a = 1
    e = np.exp(real - real.max(axis=a, keepdims=True))
    y = (e / e.sum(axis=a, keepdims=True)).reshape(shape)
    return _output(y / np.float64(_scalar(y_scale)), x, y_zero_point)


@op("QuantizeLinear", since=1, domain=MS_DOMAIN)
def ms_quantize_linear(
    x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *, axis: int = 1
) -> np.ndarray:
    """ai.onnx QuantizeLinear-13 semantics with 16-bit and 4-bit targets as well."""
    out_dt = np.dtype(np.uint8) if y_zero_point is None else np.asarray(y_zero_point).dtype
    return quantize(x, y_scale, y_zero_point, axis=axis, out_dtype=out_dt)


@op("DequantizeLinear", since=1, domain=MS_DOMAIN)
def ms_dequantize_linear(
    x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None, *, axis: int = 1
) -> np.ndarray:
    """ai.onnx DequantizeLinear-13 semantics with 16-bit and 4-bit inputs as well."""
    return dequantize(x, x_scale, x_zero_point, axis=axis)
