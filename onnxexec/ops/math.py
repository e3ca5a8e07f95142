"""Binary and variadic arithmetic: Add, Sub, Mul, Div, Mod, Pow, Max, Min, Sum, Mean, Clip.

Opsets 1-6 of the binary ops broadcast only through the `broadcast`/`axis`
attributes (see elementwise.legacy_broadcast); from opset 7 they broadcast like
numpy. Results keep the input element type exactly: integer arithmetic wraps, and
bfloat16 is computed in float32 and rounded back.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

import numpy as np

from onnxexec.ops.elementwise import FP_QUIET, legacy_broadcast, narrow, widen
from onnxexec.ops.registry import op

Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Div: true division for floats; integer division truncates toward zero (as in C,
    unlike numpy's flooring //): -7 / 2 = -3. Division by zero is undefined (gives 0)."""
    if a.dtype.kind in "iu":
        if a.dtype.kind == "u":
            return np.floor_divide(a, b)
        # a - fmod(a, b) is an exact multiple of b, so // is exact and rounds nowhere.
        return np.floor_divide(a - np.fmod(a, b), b)
    return np.true_divide(a, b)


def _binary(fn: Binary, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if FP_QUIET.get():  # the executor's errstate is in force (elementwise.FP_QUIET)
        return narrow(fn(widen(a), widen(b)), a.dtype)
    with np.errstate(all="ignore"):
        return narrow(fn(widen(a), widen(b)), a.dtype)


def _register_arith(op_type: str, fn: Binary, doc: str) -> None:
    """Add/Sub/Mul/Div: opset 1 (broadcast, axis, consumed_inputs), 6 (broadcast, axis),
    7 (numpy broadcasting; 13 and 14 only add types)."""

    def v1(
        a: np.ndarray,
        b: np.ndarray,
        *,
        axis: int | None = None,
        broadcast: int = 0,
        consumed_inputs: tuple[int, ...] = (),
    ) -> np.ndarray:
        return _binary(fn, *legacy_broadcast(a, b, broadcast, axis, op_type))

    def v6(
        a: np.ndarray, b: np.ndarray, *, axis: int | None = None, broadcast: int = 0
    ) -> np.ndarray:
        return _binary(fn, *legacy_broadcast(a, b, broadcast, axis, op_type))

    def v7(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _binary(fn, a, b)

    for since, h in ((1, v1), (6, v6), (7, v7)):
        h.__name__ = h.__qualname__ = f"{op_type.lower()}_v{since}"
        h.__doc__ = doc
        op(op_type, since=since)(h)


_register_arith("Add", np.add, "A + B.")
_register_arith("Sub", np.subtract, "A - B.")
_register_arith("Mul", np.multiply, "A * B.")
_register_arith("Div", _div, _div.__doc__ or "")


def _mod(a: np.ndarray, b: np.ndarray, fmod: int, allow_float_floor: bool) -> np.ndarray:
    floating = a.dtype.kind in "fV"
    if floating and not fmod and not allow_float_floor:
        raise ValueError("Mod: floating-point inputs require fmod=1 before opset 28")
    # fmod=0: sign of the divisor (Python/numpy %); fmod=1: C fmod, sign of the dividend.
    return _binary(np.fmod if fmod else np.mod, a, b)


@op("Mod", since=10)
def mod(a: np.ndarray, b: np.ndarray, *, fmod: int = 0) -> np.ndarray:
    """A mod B. fmod=0: integer modulo with the sign of B (-7 mod 3 = 2); fmod=1: C fmod
    with the sign of A (-7 fmod 3 = -1). Floats require fmod=1 (Mod-10/13)."""
    return _mod(a, b, fmod, allow_float_floor=False)


@op("Mod", since=28)
def mod_v28(a: np.ndarray, b: np.ndarray, *, fmod: int = 0) -> np.ndarray:
    """Mod-28 also defines fmod=0 for floats: A - floor(A / B) * B (sign of B), with
    x mod ±inf = x when the signs agree, else the infinity (numpy's np.mod)."""
    return _mod(a, b, fmod, allow_float_floor=True)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """X ** Y with the output in X's type (Pow-12+ lets Y have another numeric type)."""
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            if y.dtype.kind in "iu" and not (y < 0).any():
                return narrow(np.power(x, y.astype(x.dtype)), x.dtype)
            # Fractional or negative exponents: compute in double, truncate toward zero.
            return narrow(np.trunc(np.power(x.astype(np.float64), y.astype(np.float64))), x.dtype)
        xw = widen(x)
        if y.dtype != x.dtype:
            wide = np.float64 in (xw.dtype, y.dtype) or y.dtype.kind in "iu"
            calc = np.float64 if wide else np.float32
            return narrow(np.power(xw.astype(calc), widen(y).astype(calc)), x.dtype)
        return narrow(np.power(xw, widen(y)), x.dtype)


@op("Pow", since=1)
def pow_v1(
    x: np.ndarray, y: np.ndarray, *, axis: int | None = None, broadcast: int = 0
) -> np.ndarray:
    """X ** Y, broadcasting only via the broadcast/axis attributes."""
    return _pow(*legacy_broadcast(x, y, broadcast, axis, "Pow"))


@op("Pow", since=7)
def pow_(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """X ** Y with numpy broadcasting; output has X's element type."""
    return _pow(x, y)


def _variadic(fn: Binary, xs: tuple[np.ndarray, ...], broadcast: bool, op_type: str) -> np.ndarray:
    if not xs:
        raise ValueError(f"{op_type}: needs at least one input")
    if not broadcast and any(x.shape != xs[0].shape for x in xs):
        raise ValueError(
            f"{op_type}: inputs must have one shape before opset 8, "
            f"got {[list(x.shape) for x in xs]}"
        )
    dt = xs[0].dtype
    with np.errstate(all="ignore"):
        return narrow(reduce(fn, [widen(x) for x in xs]), dt)


def _mean_of(xs: tuple[np.ndarray, ...], broadcast: bool) -> np.ndarray:
    dt = xs[0].dtype
    acc = np.float32 if dt.kind == "V" or dt == np.float16 else dt
    total = _variadic(np.add, tuple(x.astype(acc) for x in xs), broadcast, "Mean")
    return narrow(total / np.asarray(len(xs), dtype=acc), dt)


# op -> binary reduction (NaN-propagating max/min, like the spec's reference)
_VARIADIC: dict[str, Binary] = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add}


def _register_variadic(op_type: str) -> None:
    """Max/Min/Sum/Mean: opset 1 (consumed_inputs), 6 (equal shapes), 8 (broadcasting;
    12 and 13 only add types)."""

    def apply(xs: tuple[np.ndarray, ...], broadcast: bool) -> np.ndarray:
        if op_type == "Mean":
            return _mean_of(xs, broadcast)
        return _variadic(_VARIADIC[op_type], xs, broadcast, op_type)

    def v1(*xs: np.ndarray, consumed_inputs: tuple[int, ...] = ()) -> np.ndarray:
        return apply(xs, False)

    def v6(*xs: np.ndarray) -> np.ndarray:
        return apply(xs, False)

    def v8(*xs: np.ndarray) -> np.ndarray:
        return apply(xs, True)

    for since, h in ((1, v1), (6, v6), (8, v8)):
        h.__name__ = h.__qualname__ = f"{op_type.lower()}_v{since}"
        h.__doc__ = f"Elementwise {op_type.lower()} of all inputs."
        op(op_type, since=since)(h)


for _name in ("Max", "Min", "Sum", "Mean"):
    _register_variadic(_name)


def _clip(x: np.ndarray, lo: object, hi: object) -> np.ndarray:
    """max(x, lo) then min(., hi): lo > hi gives hi everywhere, as Clip-11+ specifies.
    NaN inputs stay NaN."""
    xw = widen(x)
    with np.errstate(all="ignore"):
        if lo is not None:
            xw = np.maximum(xw, np.asarray(lo).astype(xw.dtype))
        if hi is not None:
            xw = np.minimum(xw, np.asarray(hi).astype(xw.dtype))
    return narrow(xw, x.dtype)


@op("Clip", since=1)
def clip_v1(
    x: np.ndarray,
    *,
    max: float | None = None,  # noqa: A002 (the spec's attribute names)
    min: float | None = None,  # noqa: A002
    consumed_inputs: tuple[int, ...] = (),
) -> np.ndarray:
    """Clip-1: bounds as attributes; an absent bound does not clip."""
    return _clip(x, min, max)


@op("Clip", since=6)
def clip_v6(
    x: np.ndarray,
    *,
    max: float = 3.4028234663852886e38,  # noqa: A002
    min: float = -3.4028234663852886e38,  # noqa: A002
) -> np.ndarray:
    """Clip-6: bounds as attributes defaulting to -/+FLT_MAX."""
    return _clip(x, min, max)


@op("Clip", since=11)
def clip(x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> np.ndarray:
    """Clip-11+: optional scalar min/max inputs of x's type (integers from opset 12);
    an omitted bound does not clip."""
    return _clip(x, lo, hi)
