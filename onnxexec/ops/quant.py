"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

Scale and zero point are per tensor (scalar), per axis (1-D, length x.shape[axis]) or
blocked (x's shape with ceil(D/block_size) on `axis`), Operators.md QuantizeLinear-21.
Integer targets round half to even and saturate; float8 targets saturate to +-max
(NaN stays NaN, +-Inf becomes +-max, or NaN for the *FNUZ types) unless saturate=0.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ops.common import norm_axis
from onnxexec.ops.registry import op

_FLOAT8 = {
    np.dtype(ml_dtypes.float8_e4m3fn),
    np.dtype(ml_dtypes.float8_e4m3fnuz),
    np.dtype(ml_dtypes.float8_e5m2),
    np.dtype(ml_dtypes.float8_e5m2fnuz),
}
_FNUZ = {np.dtype(ml_dtypes.float8_e4m3fnuz), np.dtype(ml_dtypes.float8_e5m2fnuz)}
_SMALL_FLOAT = {
    np.dtype(ml_dtypes.float4_e2m1fn),
    np.dtype(ml_dtypes.float6_e2m3fn),
    np.dtype(ml_dtypes.float6_e3m2fn),
}
_SMALL_INT = {
    np.dtype(ml_dtypes.int4),
    np.dtype(ml_dtypes.uint4),
    np.dtype(ml_dtypes.int2),
    np.dtype(ml_dtypes.uint2),
}


def is_integer(dt: np.dtype) -> bool:
    """True for numpy integers and ml_dtypes' int4/uint4/int2/uint2."""
    return dt.kind in "iu" or dt in _SMALL_INT


def to_float(a: np.ndarray) -> np.ndarray:
    """float32 view of ml_dtypes arrays (bfloat16, float8, int4...), numpy arrays unchanged."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.kind == "V" or a.dtype in _SMALL_INT else a


def saturate(q: np.ndarray, dtype: np.dtype, sat: int = 1) -> np.ndarray:
    """Cast already-rounded (for integer targets) values to `dtype`, clamping to its range.

    For float8 with sat=0 the cast overflows per the spec's table (ml_dtypes does the same).
    """
    dtype = np.dtype(dtype)
    if is_integer(dtype):
        info = ml_dtypes.iinfo(dtype)
        return np.clip(q, info.min, info.max).astype(dtype)
    if dtype in _FLOAT8 and not sat:
        return q.astype(dtype)
    if dtype in _FLOAT8 or dtype in _SMALL_FLOAT:
        fmax = float(ml_dtypes.finfo(dtype).max)
        out = np.clip(q, -fmax, fmax)
        if dtype in _FNUZ:
            out = np.where(np.isinf(q), np.nan, out)
        return out.astype(dtype)
    return q.astype(dtype)


def expand_param(
    p: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int, what: str
) -> np.ndarray:
    """Scale / zero point broadcastable to `shape`: scalar, per-axis 1-D or blocked."""
    p = np.asarray(p)
    if p.ndim == 0 or (p.size == 1 and not block_size):
        return p.reshape(())
    ax = norm_axis(axis, len(shape), what)
    if not block_size:
        if p.ndim != 1 or p.size != shape[ax]:
            raise ValueError(
                f"{what}: per-axis parameter of shape {list(p.shape)} does not match "
                f"axis {ax} of {list(shape)}"
            )
        dims = [1] * len(shape)
        dims[ax] = p.size
        return p.reshape(dims)
    if block_size < 0:
        raise ValueError(f"{what}: block_size {block_size} must be positive")
    want = list(shape)
    want[ax] = -(-shape[ax] // block_size)
    if list(p.shape) != want:
        raise ValueError(
            f"{what}: blocked parameter shape {list(p.shape)}, expected {want} "
            f"for input {list(shape)}, axis {ax}, block_size {block_size}"
        )
    return np.repeat(p, block_size, axis=ax).take(np.arange(shape[ax]), axis=ax)


def quantize(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray | None,
    *,
    axis: int = 1,
    block_size: int = 0,
    out_dtype: np.dtype,
    sat: int = 1,
    precision: np.dtype | None = None,
) -> np.ndarray:
    """y = saturate(round(x / scale) + zero_point), in `out_dtype`."""
    s = expand_param(scale, x.shape, axis, block_size, "QuantizeLinear scale")
    if precision is not None:
        q = x.astype(precision) / s.astype(precision)
    else:
        q = to_float(x) / to_float(s)
    zp = None
    if zero_point is not None:
        zp = expand_param(zero_point, x.shape, axis, block_size, "QuantizeLinear zero point")
    if is_integer(out_dtype):
        q = np.rint(q).astype(np.float64)
        if zp is not None:
            q = q + to_float(zp).astype(np.float64)
        return saturate(q, out_dtype)
    if zp is not None and np.any(to_float(zp) != 0):
        q = q + to_float(zp)
    return saturate(q, out_dtype, sat)


def _quant_dtype(zero_point: np.ndarray | None, output_dtype: int) -> np.dtype:
    if zero_point is not None:
        zdt = np.asarray(zero_point).dtype
        if output_dtype and np_dtype(output_dtype) != zdt:
            raise ValueError(
                f"QuantizeLinear: output_dtype {np_dtype(output_dtype)} != zero point type {zdt}"
            )
        return zdt
    return np_dtype(output_dtype) if output_dtype else np.dtype(np.uint8)


@op("QuantizeLinear", since=23)
def quantize_linear(
    x: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: int = 0,
    precision: int = 0,
    saturate: int = 1,
) -> np.ndarray:
    """x (float/int32) -> quantized y; the division runs in `precision` when given."""
    return quantize(
        x,
        y_scale,
        y_zero_point,
        axis=axis,
        block_size=block_size,
        out_dtype=_quant_dtype(y_zero_point, output_dtype),
        sat=saturate,
        precision=np_dtype(precision) if precision else None,
    )


@op("QuantizeLinear", since=21)
def quantize_linear_v21(
    x: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: int = 0,
    saturate: int = 1,
) -> np.ndarray:
    """Opsets 21-22: blocked quantization and output_dtype."""
    return quantize(
        x,
        y_scale,
        y_zero_point,
        axis=axis,
        block_size=block_size,
        out_dtype=_quant_dtype(y_zero_point, output_dtype),
        sat=saturate,
    )


@op("QuantizeLinear", since=19)
def quantize_linear_v19(
    x: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    *,
    axis: int = 1,
    saturate: int = 1,
) -> np.ndarray:
    """Opsets 19-20: float8 targets and saturate."""
    return quantize(
        x, y_scale, y_zero_point, axis=axis, out_dtype=_quant_dtype(y_zero_point, 0), sat=saturate
    )


@op("QuantizeLinear", since=13)
def quantize_linear_v13(
    x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *, axis: int = 1
) -> np.ndarray:
    """Opsets 13-18: per-tensor or per-axis, int8/uint8."""
    return quantize(x, y_scale, y_zero_point, axis=axis, out_dtype=_quant_dtype(y_zero_point, 0))


@op("QuantizeLinear", since=10)
def quantize_linear_v10(
    x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None
) -> np.ndarray:
    """Opsets 10-12: per-tensor only."""
    if np.asarray(y_scale).size != 1:
        raise ValueError("QuantizeLinear-10: y_scale must be a scalar")
    return quantize(x, y_scale, y_zero_point, out_dtype=_quant_dtype(y_zero_point, 0))


def dequantize(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray | None,
    *,
    axis: int = 1,
    block_size: int = 0,
    out_dtype: np.dtype | None = None,
) -> np.ndarray:
    """y = (x - zero_point) * scale, in out_dtype (default: the scale's type)."""
    s = expand_param(scale, x.shape, axis, block_size, "DequantizeLinear scale")
    dx = to_float(x).astype(np.float32)
    if zero_point is not None:
        zp = expand_param(zero_point, x.shape, axis, block_size, "DequantizeLinear zero point")
        if np.asarray(zero_point).dtype != x.dtype:
            zdt = np.asarray(zero_point).dtype
            raise ValueError(f"DequantizeLinear: zero point type {zdt} != x type {x.dtype}")
        zpf = to_float(zp).astype(np.float32)
        if np.any(zpf != 0):
            dx = dx - zpf
    y = dx * to_float(s).astype(np.float32)
    return y.astype(out_dtype if out_dtype is not None else np.asarray(scale).dtype)


@op("DequantizeLinear", since=23)
def dequantize_linear(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: int = 0,
) -> np.ndarray:
    """Quantized x -> float; output type from output_dtype or else x_scale."""
    return dequantize(
        x,
        x_scale,
        x_zero_point,
        axis=axis,
        block_size=block_size,
        out_dtype=np_dtype(output_dtype) if output_dtype else None,
    )


@op("DequantizeLinear", since=21)
def dequantize_linear_v21(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
) -> np.ndarray:
    """Opsets 21-22: blocked dequantization."""
    return dequantize(x, x_scale, x_zero_point, axis=axis, block_size=block_size)


@op("DequantizeLinear", since=13)
def dequantize_linear_v13(
    x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None, *, axis: int = 1
) -> np.ndarray:
    """Opsets 13-20: per-tensor or per-axis."""
    return dequantize(x, x_scale, x_zero_point, axis=axis)


@op("DequantizeLinear", since=10)
def dequantize_linear_v10(
    x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None
) -> np.ndarray:
    """Opsets 10-12: per-tensor only."""
    if np.asarray(x_scale).size != 1:
        raise ValueError("DequantizeLinear-10: x_scale must be a scalar")
    return dequantize(x, x_scale, x_zero_point)


@op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 x -> (uint8 y, float32 scale, uint8 zero point) covering [min(x, 0), max(x, 0)].

    Operators.md DynamicQuantizeLinear-11; an all-zero x gets scale 1.0 as in
    onnxruntime, instead of a zero scale and a division by zero.
    """
    qmin, qmax = 0, 255
    xmax = np.float32(max(0.0, float(np.max(x)) if x.size else 0.0))
    xmin = np.float32(min(0.0, float(np.min(x)) if x.size else 0.0))
    scale = np.float32(1.0) if xmax == xmin else np.float32((xmax - xmin) / np.float32(qmax - qmin))
    zp = np.rint(np.clip(np.float32(qmin) - xmin / scale, qmin, qmax))
    y = np.clip(np.rint(x / scale) + zp, qmin, qmax)
    return (
        y.astype(np.uint8),
        np.array(scale, dtype=x.dtype),
        np.array(zp, dtype=np.uint8),
    )
