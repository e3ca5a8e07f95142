"""Random elementwise chains (what fuse_elementwise matches) with every broadcasting
pattern of the second operand: scalar, [1], row, column, rank-expanding, full; a
constant or a graph input; first or second operand; intermediates also read outside."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.differential._sub import Sub, values

UNARY = ("Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Reciprocal", "Erf")
BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min")
# float32 ops that numpy and the fused kernel compute with the same IEEE operation:
# their chains must be bit-equal; the others use vectorized exp / tanh / erf (kernels/math/vmath.py)
EXACT_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Neg", "Abs", "Relu", "Sqrt"})
PATTERNS = ("scalar", "one", "row", "column", "rank_up", "full", "self")


def _other_shape(data: st.DataObject, pattern: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    if pattern == "scalar":
        return ()
    if pattern == "one":
        return (1,)
    if pattern == "row":
        return shape[-1:] if shape else (1,)
    if pattern == "column":
        return (shape[-2], 1) if len(shape) >= 2 else (3, 1)
    if pattern == "rank_up":
        return (data.draw(st.integers(1, 3), label="new_axis"), *((1,) * len(shape)))
    return shape


def elementwise(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("elementwise", prefix)
    rank = data.draw(st.integers(0, 4), label="rank")
    shape = tuple(data.draw(st.integers(1, 5), label="dim") for _ in range(rank))
    cur = sub.input("x", values(data, shape), data)
    used = set()
    for i in range(data.draw(st.integers(2, 5), label="length")):
        op = data.draw(st.sampled_from(UNARY + BINARY), label="op")
        used.add(op)
        if op in UNARY:
            cur = sub.add(op, [cur], f"t{i}")
        else:
            pattern = data.draw(st.sampled_from(PATTERNS), label="pattern")
            if pattern == "self":
                other = cur
            else:
                oshape = _other_shape(data, pattern, shape)
                v = values(data, oshape)
                as_input = data.draw(st.booleans(), label="as_input")
                other = sub.input(f"c{i}", v, data) if as_input else sub.const(f"c{i}", v)
                shape = tuple(np.broadcast_shapes(shape, oshape))
            pair = [other, cur] if data.draw(st.booleans(), label="const_first") else [cur, other]
            cur = sub.add(op, pair, f"t{i}")
        if data.draw(st.integers(0, 6), label="extra_reader") == 0:
            sub.outputs.append(cur)  # a second reader of an intermediate
    if cur not in sub.outputs:
        sub.outputs.append(cur)
    sub.tol = (0.0, 0.0) if used <= EXACT_OPS else (1e-5, 1e-6)
    return sub
