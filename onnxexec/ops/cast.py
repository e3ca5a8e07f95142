"""Cast, CastLike and BitCast.

Numeric rules (Operators.md Cast): float -> int truncates toward zero (out of range
is undefined); int -> int wraps (two's complement), also into int4/uint4/int2/uint2;
anything -> bool is `!= 0` (NaN -> True); float8 saturation and float8e8m0 rounding
are in cast_float8.py. Strings: numbers format as the shortest text that reads back
to the same value ("0.47892547", "100", "1e+20"), with the spec's reserved literals
"NaN", "INF", "-INF" for the specials; parsing accepts plain and scientific notation
and the literals case-insensitively ("+INF", "inf", "nan"). bool formats as "1"/"0".

Versions: Cast-1 names the target type as a string ("FLOAT"); Cast-6 as an enum;
Cast-19 adds `saturate`, Cast-24 `round_mode`. Other versions only add types.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxexec.ir.dtypes import TensorProto, np_dtype, onnx_dtype
from onnxexec.ops.registry import op

# ml_dtypes' types are named, not imported: a model with none of them never loads
# ml_dtypes (0.55 s and 8 MB here); ir.dtypes.np_dtype imports it on first need.
_SUB_BYTE_NAMES = {
    "int4": np.dtype(np.int8),
    "uint4": np.dtype(np.uint8),
    "int2": np.dtype(np.int8),
    "uint2": np.dtype(np.uint8),
}


def _sub_byte(dt: np.dtype) -> np.dtype | None:
    """The numpy int type holding ml_dtypes' int4 / uint4 / int2 / uint2, else None."""
    return _SUB_BYTE_NAMES.get(dt.name) if dt.kind == "V" else None


_STRING = np.dtype(object)


def _is_exotic_float(dt: np.dtype) -> bool:
    """bfloat16, float8*, float4, float6 (ml_dtypes floats), not the sub-byte ints."""
    return dt.kind == "V" and dt.name not in _SUB_BYTE_NAMES


def _ml_float(dt: np.dtype) -> bool:
    """Any of ml_dtypes' float types, as a Cast target. Registered dtypes number from
    NPY_USERDEF (256); float8_e5m2 has kind 'f', the others 'V'."""
    return dt.num >= 256 and dt.name not in _SUB_BYTE_NAMES


def _plain(x: np.ndarray) -> np.ndarray:
    """Exotic source types widened exactly: ml_dtypes floats -> float32, int4/int2 -> int8."""
    wide = _sub_byte(x.dtype)
    if wide is not None:
        return x.astype(wide)
    if _is_exotic_float(x.dtype):
        return x.astype(np.float32)
    return x


def _cast_numeric(x: np.ndarray, dt: np.dtype, saturate: bool, round_mode: str) -> np.ndarray:
    x = _plain(x)
    if dt == np.bool_:
        return np.asarray(x != 0)
    if _ml_float(dt):
        from onnxexec.ops.cast_float8 import E8M0, FLOAT8, to_e8m0, to_float8, to_narrow_float

        if dt in FLOAT8:
            return to_float8(x, dt, saturate)
        if dt == E8M0:
            return to_e8m0(x, saturate, round_mode)
        return to_narrow_float(x, dt)
    with np.errstate(all="ignore"):
        if _sub_byte(dt) is not None:
            # Through int64 (floats truncated toward zero first), then wrap like any
            # other int -> int conversion: 9 -> int4 -7.
            wide = np.trunc(x) if x.dtype.kind == "f" else x
            return wide.astype(np.int64).astype(dt)
        return x.astype(dt)  # float -> int truncates toward zero, int -> int wraps


def _format(v: Any, kind: str) -> str:
    if kind == "b":
        return "1" if v else "0"
    if kind in "iu":
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "INF" if f > 0 else "-INF"
    s = str(v)  # numpy's shortest round-trip repr for this precision
    return s[:-2] if s.endswith(".0") else s


def _to_strings(x: np.ndarray) -> np.ndarray:
    x = _plain(x)
    kind = x.dtype.kind
    flat = [_format(v, kind) for v in x.reshape(-1)]
    return np.array(flat, dtype=object).reshape(x.shape)


def _parse_int(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        return math.trunc(float(s))  # "100.5" -> 100 (spec: "may yield 100")


def _from_strings(x: np.ndarray, dt: np.dtype, saturate: bool, round_mode: str) -> np.ndarray:
    items = [str(s).strip() for s in x.reshape(-1)]
    if dt == np.bool_:
        vals = [s.lower() == "true" or (s.lower() != "false" and float(s) != 0) for s in items]
        return np.array(vals, dtype=bool).reshape(x.shape)
    sub = _sub_byte(dt)
    base = dt if sub is None else sub
    if base.kind in "iu":
        bits = 8 * base.itemsize if sub is None else 64
        ints = [_parse_int(s) & ((1 << bits) - 1) for s in items]
        if base.kind == "i" or sub is not None:  # wrap into two's complement
            ints = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in ints]
        wide = np.array(ints, dtype=np.uint64 if base == np.uint64 else np.int64)
        return _cast_numeric(wide.reshape(x.shape), dt, saturate, round_mode)
    # float() accepts "1e-5", "1E8" and inf/+inf/-inf/nan in any case, as the spec asks.
    floats = np.array([float(s) for s in items], dtype=np.float64).reshape(x.shape)
    return _cast_numeric(floats, dt, saturate, round_mode)


# Plain numpy numbers whose conversion is a bare astype; see _direct_target.
_PLAIN = frozenset(np.dtype(c) for c in "?bhilqBHILQefd")
_DIRECT: dict[tuple[np.dtype, int], np.dtype | None] = {}


def _direct_target(src: np.dtype, to: int) -> np.dtype | None:
    """The target dtype when x.astype(it) is the whole Cast from `src`, else None.

    That holds for same-type, int -> int (wraps, silently) and conversions numpy calls
    safe, plus int -> float32/float64 (rounds, cannot overflow). Float -> int, float
    narrowing, bool targets and every exotic or string type take the general path,
    which silences numpy's overflow warnings and applies the spec's special rules.
    """
    try:
        dt = np_dtype(to)
    except (KeyError, ValueError, TypeError):
        return None
    if src not in _PLAIN or dt not in _PLAIN or dt == np.bool_:
        return None
    if src == dt or (src.kind in "biu" and dt.kind in "iu") or np.can_cast(src, dt, "safe"):
        return dt
    if src.kind in "biu" and dt in (np.dtype(np.float32), np.dtype(np.float64)):
        return dt
    return None


def cast(x: np.ndarray, to: int, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """x converted to ONNX element type `to` (a TensorProto.DataType value)."""
    key = (x.dtype, to)
    if key not in _DIRECT:
        _DIRECT[key] = _direct_target(x.dtype, to)
    direct = _DIRECT[key]
    if direct is not None:
        return x if x.dtype == direct else x.astype(direct)
    dt = np_dtype(to)
    src_is_str = x.dtype == _STRING or x.dtype.kind in "US"
    if dt == _STRING:
        return np.asarray(x.astype(object)) if src_is_str else _to_strings(x)
    if src_is_str:
        return _from_strings(x, dt, bool(saturate), round_mode)
    if x.dtype == dt:
        return x
    return np.asarray(_cast_numeric(x, dt, bool(saturate), round_mode))


def _enum(to: int | str | bytes) -> int:
    """Cast-1's `to` is a type name ("FLOAT", "float16"); later versions use the enum."""
    if isinstance(to, bytes):
        to = to.decode()
    if isinstance(to, str):
        try:
            return TensorProto[to.upper()].value
        except KeyError:
            raise ValueError(f"Cast: unknown element type name '{to}'") from None
    return int(to)


@op("Cast", since=1)
def cast_v1(x: np.ndarray, *, to: str) -> np.ndarray:
    """Cast-1: target type given by name, e.g. to="FLOAT"."""
    return cast(x, _enum(to))


@op("Cast", since=6)
def cast_v6(x: np.ndarray, *, to: int) -> np.ndarray:
    """Cast to TensorProto.DataType `to`; float8 saturates."""
    return cast(x, _enum(to))


@op("Cast", since=19)
def cast_v19(x: np.ndarray, *, to: int, saturate: int = 1) -> np.ndarray:
    """Cast with `saturate` choosing float8 overflow behaviour."""
    return cast(x, _enum(to), saturate)


@op("Cast", since=24)
def cast_v24(x: np.ndarray, *, to: int, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """Cast with `saturate` and `round_mode` (float8e8m0 targets only)."""
    return cast(x, _enum(to), saturate, round_mode)


def _like(target: np.ndarray) -> int:
    return int(TensorProto.STRING) if target.dtype.kind in "OUS" else onnx_dtype(target.dtype)


@op("CastLike", since=15)
def cast_like_v15(x: np.ndarray, target_type: np.ndarray) -> np.ndarray:
    """Cast x to target_type's element type (its values are ignored)."""
    return cast(x, _like(target_type))


@op("CastLike", since=19)
def cast_like_v19(x: np.ndarray, target_type: np.ndarray, *, saturate: int = 1) -> np.ndarray:
    """CastLike with float8 `saturate`."""
    return cast(x, _like(target_type), saturate)


@op("CastLike", since=24)
def cast_like(
    x: np.ndarray, target_type: np.ndarray, *, saturate: int = 1, round_mode: str = "up"
) -> np.ndarray:
    """CastLike with `saturate` and `round_mode`."""
    return cast(x, _like(target_type), saturate, round_mode)


# Bits per element: ml_dtypes stores the sub-byte types one per byte, low bits used.
_WIDTH = {
    "int4": 4,
    "uint4": 4,
    "float4_e2m1fn": 4,
    "int2": 2,
    "uint2": 2,
    "float6_e2m3fn": 6,
    "float6_e3m2fn": 6,
}


def _width(dt: np.dtype) -> int:
    return _WIDTH.get(dt.name, dt.itemsize * 8) if dt.kind == "V" else dt.itemsize * 8


@op("BitCast", since=26)
def bitcast(x: np.ndarray, *, to: int) -> np.ndarray:
    """Reinterpret the bits of each element as type `to` (same bit width, little endian)."""
    dt = np_dtype(to)
    if dt == _STRING or x.dtype == _STRING:
        raise ValueError("BitCast: string tensors have no bit representation")
    w = _width(x.dtype)
    if w != _width(dt):
        raise ValueError(f"BitCast: {x.dtype} has {w} bits but {dt} has {_width(dt)}")
    x = x if x.flags.c_contiguous else x.copy()
    if w < 8:  # keep only the element's own bits, then reinterpret the byte
        return (x.view(np.uint8) & np.uint8((1 << w) - 1)).view(dt)
    return x.view(dt)
