"""Small matching helpers shared by the fusion passes."""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.ir.onnx_pb import TensorProto
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes.shape_inference import Facts, infer_shapes

FLOAT = TensorProto.FLOAT

_facts_cache: dict[int, tuple[Graph, dict[str, Facts]]] = {}


def facts_of(g: Graph) -> dict[str, Facts]:
    """infer_shapes(g), remembered for the last few graphs (passes that change nothing
    return the same Graph object, so consecutive passes share one inference)."""
    hit = _facts_cache.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    facts = infer_shapes(g)
    if len(_facts_cache) > 8:
        _facts_cache.clear()
    _facts_cache[id(g)] = (g, facts)
    return facts


def clear_caches() -> None:
    _facts_cache.clear()


def is_float32(facts: dict[str, Facts], name: str) -> bool:
    f = facts.get(name)
    return f is not None and f.elem == FLOAT


def float32_operands(ed: GraphEditor, facts: dict[str, Facts], *names: str) -> bool:
    """Whether the inputs `names` of one op, which the spec types alike (Conv's X and W,
    MatMul's A and B: one type T), are float32: known so for any of them, from shape
    inference or as a constant. A constant weight answers even when the activation's
    producer has no shape rule (issue 26: a Conv after a Pad or a Resize)."""
    for name in names:
        if is_float32(facts, name):
            return True
        c = ed.const(name) if name else None
        if c is not None and c.dtype == np.float32:
            return True
    return False


def const_operand(ed: GraphEditor, n: Node) -> tuple[str, np.ndarray, int] | None:
    """For a binary node with exactly one constant input: (other input, constant, its index)."""
    if len(n.inputs) != 2 or not all(n.inputs):
        return None
    c0, c1 = ed.const(n.inputs[0]), ed.const(n.inputs[1])
    if c0 is not None and c1 is None:
        return n.inputs[1], c0, 0
    if c1 is not None and c0 is None:
        return n.inputs[0], c1, 1
    return None


def scalar_operand(ed: GraphEditor, n: Node) -> tuple[str, float] | None:
    """For a binary node whose constant input holds one number: (other input, number)."""
    m = const_operand(ed, n)
    if m is None or m[1].size != 1 or m[1].dtype.kind not in "fiu":
        return None
    return m[0], float(m[1].reshape(-1)[0])


def close(a: float | None, b: float, rtol: float = 1e-3) -> bool:
    return a is not None and abs(a - b) <= rtol * abs(b)


def other_input(n: Node, name: str) -> str | None:
    """The input of a binary node that is not `name` (None if `name` is not an input)."""
    if len(n.inputs) != 2:
        return None
    if n.inputs[0] == name:
        return n.inputs[1]
    if n.inputs[1] == name:
        return n.inputs[0]
    return None


def only_consumer(ed: GraphEditor, name: str, *op_types: str) -> Node | None:
    """The single node reading `name` (read once, not a graph output) if of `op_types`."""
    if not ed.single_use(name):
        return None
    users = ed.consumers(name)
    if len(users) != 1 or users[0].domain or users[0].op_type not in op_types:
        return None
    return users[0]


def last_axis_vector(v: np.ndarray, n: int) -> np.ndarray | None:
    """`v` as an (n,) vector if it broadcasts only along the last axis, else None."""
    if v.size == n and all(d == 1 for d in v.shape[:-1]) and (v.ndim == 0 or v.shape[-1] == n):
        return v.reshape(n)
    if v.size == 1:
        return np.full(n, v.reshape(-1)[0], dtype=v.dtype)
    return None


def vector_input(ed: GraphEditor, name: str, vec: np.ndarray, tag: str) -> str:
    """A value holding `vec` exactly as the (n,) array it is: `name` itself when that
    constant already has this shape, else a new constant.

    Fused kernels index a bias / scale as `b[j]` for j < n: handing them the original
    `[1]` or `(1, n)` constant instead of the expanded vector reads past its end."""
    c = ed.const(name)
    if c is not None and c.shape == vec.shape and c.dtype == vec.dtype and np.array_equal(c, vec):
        return name
    return ed.add_const(f"{name}__{tag}", np.ascontiguousarray(vec))
