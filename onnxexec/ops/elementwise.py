"""Unary elementwise math: Abs, Neg, Ceil, Floor, Round, Sign, Sqrt, Exp, Log, Erf,
Reciprocal, the trigonometric and hyperbolic functions, IsNaN, IsInf and Identity.

Plus the helpers the other elementwise families share: `widen` (compute exotic floats
in float32), `unary` (apply a ufunc and keep the input dtype) and `legacy_broadcast`
(the opset 1-6 `broadcast`/`axis` attributes of the binary ops).

Opset 1 versions carry the ignored `consumed_inputs` attribute (a Caffe2 in-place
hint), which opset 6 removed; later versions only widen the type lists.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np

from onnxexec.kernels.math.special import erf
from onnxexec.ops.registry import op

Ufunc = Callable[[np.ndarray], Any]


# True while the executor runs a graph inside np.errstate(all="ignore") (ONNX: domain
# errors give NaN/inf silently, as in C). The elementwise handlers then skip their own
# errstate, whose enter/exit costs twice a ufunc call on a tiny tensor. A context
# variable: each thread (each concurrent run) sees its own value.
FP_QUIET: ContextVar[bool] = ContextVar("onnxexec_fp_quiet", default=False)


def widen(x: np.ndarray) -> np.ndarray:
    """bfloat16 / float8 (ml_dtypes, kind 'V') -> float32 so every numpy ufunc applies."""
    return x.astype(np.float32) if x.dtype.kind == "V" else x


def narrow(y: Any, dtype: np.dtype) -> np.ndarray:
    """Result back to the op's element type, always as an ndarray (never a numpy scalar)."""
    y = np.asarray(y)
    return y if y.dtype == dtype else y.astype(dtype)


def unary(fn: Ufunc, x: np.ndarray) -> np.ndarray:
    """fn(x) with x's dtype kept; domain errors give NaN/inf silently, as in C."""
    if FP_QUIET.get():
        return narrow(fn(widen(x)), x.dtype)
    with np.errstate(all="ignore"):
        return narrow(fn(widen(x)), x.dtype)


def legacy_broadcast(
    a: np.ndarray, b: np.ndarray, broadcast: int, axis: int | None, op_type: str
) -> tuple[np.ndarray, np.ndarray]:
    """Opsets 1-6 binary ops (Add-1/6, And-1, Equal-1, Pow-1...): no numpy broadcasting.

    broadcast=0: shapes must match. broadcast=1: B (rank <= A's) is broadcast onto A,
    its dims aligned with A's starting at `axis` (default: trailing alignment), e.g.
    A (2, 3, 4, 5) + B (3, 4) with axis=1.
    """
    if not broadcast:
        if a.shape != b.shape:
            raise ValueError(
                f"{op_type}: shapes {list(a.shape)} and {list(b.shape)} differ and "
                "broadcast=0 (opsets before 7 do not broadcast implicitly)"
            )
        return a, b
    if b.ndim > a.ndim:
        raise ValueError(f"{op_type}: B has rank {b.ndim} > A's rank {a.ndim}")
    start = a.ndim - b.ndim if axis is None else axis + a.ndim if axis < 0 else axis
    if b.size == 1 and b.ndim <= 1:  # a scalar B broadcasts everywhere
        return a, b.reshape(())
    if not 0 <= start <= a.ndim - b.ndim:
        raise ValueError(f"{op_type}: axis {axis} does not fit B {list(b.shape)} into A")
    shape = (1,) * start + b.shape + (1,) * (a.ndim - start - b.ndim)
    return a, b.reshape(shape)


def erf_array(x: np.ndarray) -> np.ndarray:
    return erf(np.asarray(x))


def _register(op_type: str, fn: Ufunc, since: int, legacy: bool, doc: str) -> None:
    """Register a unary op: with `legacy`, an opset-1 handler taking consumed_inputs
    plus the attribute-free one from opset 6; otherwise one handler at `since`."""

    def handler(x: np.ndarray) -> np.ndarray:
        return unary(fn, x)

    handler.__name__ = handler.__qualname__ = op_type.lower()
    handler.__doc__ = doc
    if legacy:

        def handler_v1(x: np.ndarray, *, consumed_inputs: tuple[int, ...] = ()) -> np.ndarray:
            return unary(fn, x)

        handler_v1.__name__ = handler_v1.__qualname__ = f"{op_type.lower()}_v1"
        handler_v1.__doc__ = doc
        op(op_type, since=1)(handler_v1)
        op(op_type, since=6)(handler)
    else:
        op(op_type, since=since)(handler)


# op -> (ufunc, first opset, has an opset-1 version with consumed_inputs, docstring)
UNARY: dict[str, tuple[Ufunc, int, bool, str]] = {
    "Abs": (np.abs, 1, True, "|x|, integers included (abs(INT_MIN) wraps)."),
    "Neg": (np.negative, 1, True, "-x; signed integers wrap."),
    "Ceil": (np.ceil, 1, True, "Smallest integral value >= x."),
    "Floor": (np.floor, 1, True, "Largest integral value <= x."),
    "Sqrt": (np.sqrt, 1, True, "sqrt(x); NaN for x < 0."),
    "Exp": (np.exp, 1, True, "e**x."),
    "Log": (np.log, 1, True, "Natural log; -inf at 0, NaN below."),
    "Reciprocal": (np.reciprocal, 1, True, "1/x."),
    "Acos": (np.arccos, 7, False, "arccos(x)."),
    "Asin": (np.arcsin, 7, False, "arcsin(x)."),
    "Atan": (np.arctan, 7, False, "arctan(x)."),
    "Cos": (np.cos, 7, False, "cos(x)."),
    "Sin": (np.sin, 7, False, "sin(x)."),
    "Tan": (np.tan, 7, False, "tan(x)."),
    "Acosh": (np.arccosh, 9, False, "arccosh(x)."),
    "Asinh": (np.arcsinh, 9, False, "arcsinh(x)."),
    "Atanh": (np.arctanh, 9, False, "arctanh(x)."),
    "Cosh": (np.cosh, 9, False, "cosh(x)."),
    "Sinh": (np.sinh, 9, False, "sinh(x)."),
    "Erf": (erf_array, 9, False, "Gauss error function."),
    "Sign": (np.sign, 9, False, "-1, 0 or 1 (NaN stays NaN); unsigned inputs give 0 or 1."),
    # Round-11: "rounds half to even" (numpy's rint), e.g. 2.5 -> 2, -1.5 -> -2.
    "Round": (np.rint, 11, False, "Round to nearest integer, ties to even."),
}

for _name, (_fn, _since, _legacy, _doc) in UNARY.items():
    _register(_name, _fn, _since, _legacy, _doc)


@op("IsNaN", since=9)
def isnan(x: np.ndarray) -> np.ndarray:
    """bool mask of NaN elements."""
    return np.asarray(np.isnan(widen(x)))


@op("IsInf", since=10)
def isinf(x: np.ndarray, *, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    """bool mask of +inf (if detect_positive) and -inf (if detect_negative) elements."""
    x = widen(x)
    if x.dtype.kind not in "fc":
        return np.zeros(x.shape, dtype=bool)
    pos = np.isposinf(x) if detect_positive else np.zeros(x.shape, dtype=bool)
    neg = np.isneginf(x) if detect_negative else np.zeros(x.shape, dtype=bool)
    return np.asarray(pos | neg)


@op("Identity", since=1)
def identity(x: Any) -> Any:
    """The input itself: a tensor, a sequence (opset 14+) or an optional (opset 16+)."""
    return x
