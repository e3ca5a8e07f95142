"""Logic, comparison and bitwise ops: And, Or, Xor, Not, Equal, Greater, Less,
GreaterOrEqual, LessOrEqual, BitShift, BitwiseAnd/Or/Xor/Not and Where.

Comparisons return bool tensors; Equal-19 also compares strings. Opset-1 versions of
the binary ops take the legacy `broadcast`/`axis` attributes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxexec.ops.elementwise import legacy_broadcast
from onnxexec.ops.registry import op

Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _as_bool(fn: Binary, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(fn(a, b), dtype=bool)


def _register_binary_v1_v7(op_type: str, fn: Binary, doc: str) -> None:
    """Opset 1 (broadcast, axis attributes) and 7 (numpy broadcasting; later versions
    only add types)."""

    def v1(
        a: np.ndarray, b: np.ndarray, *, axis: int | None = None, broadcast: int = 0
    ) -> np.ndarray:
        return _as_bool(fn, *legacy_broadcast(a, b, broadcast, axis, op_type))

    def v7(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _as_bool(fn, a, b)

    for since, h in ((1, v1), (7, v7)):
        h.__name__ = h.__qualname__ = f"{op_type.lower()}_v{since}"
        h.__doc__ = doc
        op(op_type, since=since)(h)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # `==` compares object (string) arrays elementwise too.
    return np.asarray(a == b)


_register_binary_v1_v7("And", np.logical_and, "A and B (bool).")
_register_binary_v1_v7("Or", np.logical_or, "A or B (bool).")
_register_binary_v1_v7("Xor", np.logical_xor, "A xor B (bool).")
_register_binary_v1_v7("Equal", _equal, "A == B; numbers, bools, strings (opset 19).")
_register_binary_v1_v7("Greater", np.greater, "A > B.")
_register_binary_v1_v7("Less", np.less, "A < B.")


@op("GreaterOrEqual", since=12)
def greater_or_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A >= B (numpy broadcasting)."""
    return _as_bool(np.greater_equal, a, b)


@op("LessOrEqual", since=12)
def less_or_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A <= B (numpy broadcasting)."""
    return _as_bool(np.less_equal, a, b)


@op("Not", since=1)
def not_(x: np.ndarray) -> np.ndarray:
    """Logical negation of a bool tensor."""
    return np.asarray(np.logical_not(x))


@op("BitShift", since=11)
def bitshift(x: np.ndarray, y: np.ndarray, *, direction: str) -> np.ndarray:
    """X << Y or X >> Y elementwise, X's type (unsigned in opset 11, signed too from 28).

    BitShift-28 pins down what C leaves undefined, and the same results are returned
    for every version: right shifts of signed X are arithmetic; a shift amount that is
    negative or >= the bit width gives what sign extension alone produces (-1 for a
    right shift of a negative X, else 0); left shifts discard bits past the top.
    """
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    bits = x.dtype.itemsize * 8
    x, y = np.broadcast_arrays(x, y)
    # Shift counts as int64; uint64 counts >= 2**63 turn negative, which is out of range
    # either way.
    amount = y.astype(np.int64)
    valid = (amount >= 0) & (amount < bits)
    safe = np.where(valid, amount, 0).astype(x.dtype)
    if direction == "LEFT":
        out = np.where(valid, np.left_shift(x, safe), 0)
    else:
        fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
        out = np.where(valid, np.right_shift(x, safe), fill)
    return np.asarray(out).astype(x.dtype, copy=False)


@op("BitwiseAnd", since=18)
def bitwise_and(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A & B for integer tensors."""
    return np.asarray(np.bitwise_and(a, b))


@op("BitwiseOr", since=18)
def bitwise_or(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A | B for integer tensors."""
    return np.asarray(np.bitwise_or(a, b))


@op("BitwiseXor", since=18)
def bitwise_xor(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A ^ B for integer tensors."""
    return np.asarray(np.bitwise_xor(a, b))


@op("BitwiseNot", since=18)
def bitwise_not(x: np.ndarray) -> np.ndarray:
    """~X for integer tensors."""
    return np.asarray(np.invert(x))


@op("Where", since=9)
def where(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """X where condition else Y, all three broadcast together (numpy rules)."""
    out = np.where(condition.astype(bool, copy=False), x, y)
    return out if out.dtype == x.dtype else out.astype(x.dtype)
