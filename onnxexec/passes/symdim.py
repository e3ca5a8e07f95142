"""Symbolic tensor dimensions: an int, or a product of named factors ("batch*seq",
"12*seq") kept in canonical form (coefficient first, factors sorted), so equal
products compare equal as strings and exact division can cancel factors.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count

Dim = int | str

_fresh = count()


def fresh(prefix: str = "?") -> str:
    """A new symbol equal to no other: an unknown dimension."""
    return f"{prefix}{next(_fresh)}"


def _parse(d: Dim) -> tuple[int, tuple[str, ...]]:
    if isinstance(d, int):
        return d, ()
    coef, names = 1, []
    for part in d.split("*"):
        if part.lstrip("-").isdigit():
            coef *= int(part)
        else:
            names.append(part)
    return coef, tuple(sorted(names))


def factors(d: Dim) -> tuple[int, tuple[str, ...]]:
    """(coefficient, sorted symbol names) of a dimension: "2*b*t" -> (2, ("b", "t"))."""
    return _parse(d)


def _make(coef: int, names: Sequence[str]) -> Dim:
    if not names or coef == 0:
        return coef
    body = "*".join(sorted(names))
    return body if coef == 1 else f"{coef}*{body}"


def mul(a: Dim, b: Dim) -> Dim:
    ca, na = _parse(a)
    cb, nb = _parse(b)
    return _make(ca * cb, na + nb)


def div(a: Dim, b: Dim) -> Dim | None:
    """Exact quotient a / b, or None when it is not a product of b's factors."""
    ca, na = _parse(a)
    cb, nb = _parse(b)
    if cb == 0 or ca % cb:
        return None
    rest = list(na)
    for name in nb:
        if name not in rest:
            return None
        rest.remove(name)
    return _make(ca // cb, rest)


def prod(dims: Sequence[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = mul(out, d)
    return out


def is_static(dims: Sequence[Dim] | None) -> bool:
    return dims is not None and all(isinstance(d, int) for d in dims)


def broadcast(a: Dim, b: Dim) -> Dim:
    """Numpy broadcast of two dims; an unknown result becomes a fresh symbol."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    if isinstance(a, int) and isinstance(b, int):
        raise ValueError(f"dimensions {a} and {b} do not broadcast")
    if isinstance(b, int):
        return b  # symbolic a must be b (or 1, which would make the result b too)
    if isinstance(a, int):
        return a
    return fresh()


def broadcast_shapes(*shapes: tuple[Dim, ...]) -> tuple[Dim, ...]:
    rank = max(len(s) for s in shapes)
    out: list[Dim] = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, start=rank - len(s)):
            out[i] = broadcast(out[i], d)
    return tuple(out)
