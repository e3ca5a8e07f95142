"""Narrowing casts to the low-precision float types (not a handler module).

- bfloat16 / float8 / float4 / float6 from double: ml_dtypes converts double via
  float32, which rounds twice (1 + 2**-8 + 2**-30 -> bfloat16 1.0 instead of
  1.0078125). We first round double to float32 *to odd* (truncate, then set the last
  bit if inexact): with >= 2 spare bits that intermediate cannot create a false tie,
  so the final round-to-nearest-even is correct.
- float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ follow Operators.md Cast, "Float 8 types": with
  saturate=1 (the default) +-inf and values that round beyond the largest finite
  value become +-FLT_MAX; with saturate=0 they become NaN (E5M2: +-inf). NaN stays
  NaN; -0 becomes +0 in the FNUZ types. ml_dtypes' astype is exactly the saturate=0
  table (RNE, overflow to NaN/inf), so saturation clamps before converting.
- float8 E8M0 (powers of two 2**-127 .. 2**127, 0xFF = NaN) follows the Cast-24
  table and the `round_mode` attribute: up (toward +inf), down (toward 0), nearest
  (ties up). Out of range saturates to 2**-127 / 2**127, or gives NaN with saturate=0.
  Negative inputs are unspecified; their magnitude is used.
"""

from __future__ import annotations

from typing import Final

import ml_dtypes
import numpy as np

FLOAT8: Final = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
    )
)
E8M0: Final = np.dtype(ml_dtypes.float8_e8m0fnu)


def f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32, truncating toward zero and forcing the last bit to 1 when
    the value was inexact (so a later narrower rounding sees no false ties)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
        inexact = np.isfinite(x) & (f.astype(np.float64) != x)
        over = inexact & (np.abs(f.astype(np.float64)) > np.abs(x))
        f = np.where(over, np.nextafter(f, np.float32(0)), f)
    bits = f.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def to_narrow_float(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Any float/int array -> bfloat16/float4/float6 (or float8 without saturation),
    rounding once to nearest even."""
    if x.dtype == np.float64 or x.dtype.kind in "biu":
        x = f32_round_to_odd(x.astype(np.float64))
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def to_float8(x: np.ndarray, dtype: np.dtype, saturate: bool) -> np.ndarray:
    """x -> one of the four float8 types, per the Cast saturation tables."""
    if saturate:
        limit = float(ml_dtypes.finfo(dtype).max)
        wide = x.astype(np.float64) if x.dtype.kind in "biuV" else x
        with np.errstate(all="ignore"):
            # Clamping before rounding equals clamping [x]: anything above FLT_MAX rounds
            # to FLT_MAX or beyond. np.clip keeps NaN.
            x = np.clip(wide, -limit, limit)
    return to_narrow_float(x, dtype)


def to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """x -> float8e8m0 (a biased power-of-two exponent), see the module docstring."""
    if round_mode not in ("up", "down", "nearest"):
        raise ValueError(f"Cast: round_mode must be 'up', 'down' or 'nearest', got {round_mode!r}")
    v = np.abs(np.asarray(x).astype(np.float64))
    finite = np.isfinite(v) & (v > 0)
    mant, exp = np.frexp(np.where(finite, v, 1.0))  # v = mant * 2**exp, mant in [0.5, 1)
    floor_log2 = exp.astype(np.int64) - 1
    if round_mode == "up":
        e = floor_log2 + (mant != 0.5)
    elif round_mode == "down":
        e = floor_log2
    else:  # linear nearest between 2**k and 2**(k+1); the midpoint 1.5 * 2**k goes up
        e = floor_log2 + (mant >= 0.75)
    code = e + 127
    low, high = (0, 254) if saturate else (255, 255)
    code = np.where(code < 0, low, np.where(code > 254, high, code))
    code = np.where(finite, code, np.where(v == 0, low, 255))
    code = np.where(np.isposinf(v), 254 if saturate else 255, code)
    return code.astype(np.uint8).view(E8M0)
