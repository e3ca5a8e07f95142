"""Random rotate-half rotary embeddings (what fuse_rope matches): x (B, H, T, D),
cos / sin tables of several broadcast shapes, either operand order; near misses that
must NOT fuse: the halves concatenated the other way, a second reader of the rotation,
and tables that broadcast x to a larger shape."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.differential._sub import Sub, values


def _slice(sub: Sub, x: str, start: int, end: int, out: str) -> str:
    ins = [x]
    for tag, v in (("st", start), ("en", end), ("ax", -1)):
        name = sub.name(f"{out}_{tag}")
        sub.inits[name] = np.array([v], np.int64)
        ins.append(name)
    return sub.add("Slice", ins, out)


def rope(data: st.DataObject, prefix: str, opset: int) -> Sub:
    sub = Sub("rope", prefix)
    b, h, t = (data.draw(st.integers(1, 3), label=n) for n in ("B", "H", "T"))
    d = 2 * data.draw(st.integers(1, 4), label="half")
    x = sub.input("x", values(data, (b, h, t, d)), data)
    miss = data.draw(st.sampled_from(["", "", "", "order", "reader", "wide_table"]), label="near")
    tshape = data.draw(st.sampled_from([(t, d), (1, 1, t, d), (b, 1, t, d)]), label="table")
    if miss == "wide_table":
        tshape = (2, b, h, t, d)  # broadcasts the result to rank 5: not x's shape
    cos = sub.input("cos", values(data, tshape, special=False), data)
    sin = sub.input("sin", values(data, tshape, special=False), data)
    x1 = _slice(sub, x, 0, d // 2, "x1")
    x2 = _slice(sub, x, d // 2, 2**63 - 1, "x2")
    neg = sub.add("Neg", [x2], "neg")
    halves = [x1, neg] if miss == "order" else [neg, x1]
    rot = sub.add("Concat", halves, "rot", axis=-1)
    if miss == "reader":
        sub.outputs.append(rot)
    swap = data.draw(st.booleans(), label="swap")
    a = sub.add("Mul", [cos, x] if swap else [x, cos], "xc")
    c = sub.add("Mul", [sin, rot] if swap else [rot, sin], "rs")
    sub.outputs.append(sub.add("Add", [c, a] if swap else [a, c], "y"))
    sub.tol = (1e-6, 1e-6)  # x*cos + rot*sin: the same two products and sum
    (sub.must_not if miss else sub.must).add("FusedRotary")
    return sub
