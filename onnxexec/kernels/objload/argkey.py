"""The overload a call needs, as a hashable key computed from the arguments without
numba, and the same key computed from a compiled overload's numba signature.

Both sides follow numba's `typeof` for what the kernels take: an ndarray is typed by
dtype, ndim, layout ('C' if C-contiguous, else 'F' if F-contiguous, else 'A'),
writability and alignment (numba/np/numpy_support.py `map_layout`, typeof.py
`_typeof_ndarray`); a Python int is int64, a float float64, a complex complex128, a
bool boolean; a numpy scalar its dtype; a tuple its element types. Anything else has
no key (None), and the call goes to numba itself: a kernel must never run an overload
compiled for other types, which would read its arguments' memory wrongly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Token = Any  # str | tuple: hashable, picklable, numba-free
_NUMERIC_KINDS = frozenset("biufc")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _token(a: Any) -> Token:
    t = type(a)
    if t is np.ndarray:
        d = a.dtype
        if d.kind not in _NUMERIC_KINDS or not d.isnative:
            return None
        f = a.flags
        layout = "C" if f.c_contiguous else "F" if f.f_contiguous else "A"
        return (d.str, a.ndim, layout, f.writeable, f.aligned)
    if t is int:
        return "<i8" if _I64_MIN <= a <= _I64_MAX else None
    if t is float:
        return "<f8"
    if t is bool:
        return "|b1"
    if t is complex:
        return "<c16"
    if t is tuple:
        return ("tuple", *(_token(x) for x in a))
    if isinstance(a, np.generic) and a.dtype.kind in _NUMERIC_KINDS:
        return a.dtype.str
    if a is None:
        return "none"
    return None


def _raw(a: Any, ndarray: type = np.ndarray) -> Any:
    t = type(a)
    if t is ndarray:
        return (a.dtype, a.ndim, a.flags.num)
    if t is int:
        return t if _I64_MIN <= a <= _I64_MAX else None
    if t is tuple:  # its elements' types matter, not only that it is a tuple
        return (t, *map(_raw, a))
    return t


def raw_key(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A cheaper key with the same information as `call_key` (its value is a function
    of this one): an array's dtype, ndim and flag bits, another value's type (and for
    an int, whether it fits int64). ~0.15 us an argument against ~0.4 us for
    `call_key`: it is what every call computes; `call_key` runs on a new raw key only.
    """
    return tuple(map(_raw, args))


def call_key(args: tuple[Any, ...]) -> tuple[Token, ...]:
    """Key of a positional call; it holds None when some argument has no key."""
    return tuple(map(_token, args))


def has_key(key: tuple[Token, ...]) -> bool:
    def ok(t: Token) -> bool:
        return t is not None and (
            not isinstance(t, tuple) or t[0] != "tuple" or all(map(ok, t[1:]))
        )

    return all(map(ok, key))


def signature_key(argtypes: tuple[Any, ...]) -> tuple[Token, ...] | None:
    """The call key of a numba signature's argument types (needs numba), or None when
    a type has no numba-free key."""
    from numba.core import types
    from numba.np.numpy_support import as_dtype

    def token(ty: Any) -> Token:
        if type(ty) is types.Array:
            dt = as_dtype(ty.dtype)
            if dt.kind not in _NUMERIC_KINDS:
                return None
            return (dt.str, ty.ndim, ty.layout, ty.mutable, ty.aligned)
        if isinstance(ty, types.Literal):
            return None
        if isinstance(ty, types.Boolean | types.Integer | types.Float | types.Complex):
            return as_dtype(ty).str
        if isinstance(ty, types.UniTuple):
            return ("tuple", *(token(ty.dtype),) * ty.count)
        if isinstance(ty, types.Tuple):
            return ("tuple", *map(token, ty.types))
        if ty is types.none:
            return "none"
        return None

    key = tuple(map(token, argtypes))
    return key if has_key(key) else None
