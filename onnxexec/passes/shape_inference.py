"""Static shape and type inference with symbolic dimensions.

For every value: its element type, its shape (ints and symbols, see symdim), and for
small integer tensors that describe shapes (the outputs of Shape, and the Gather /
Unsqueeze / Concat / Cast / arithmetic chains exporters build from them) their
elements symbolically (`sym`). That is what lets fold_shapes turn
`Reshape(x, Concat(Gather(Shape(x), 0), Gather(Shape(x), 1), [12], [64]))` into
`Reshape(x, [0, 0, 12, 64])` even when batch and sequence length are symbolic.

Dimension names of the graph inputs are trusted (ONNX: equal dim_params are equal
sizes); value_info annotations are not used. Unknown dimensions get fresh symbols,
so a dimension copied around keeps comparing equal to itself. Ops without a rule
leave their outputs unknown; nothing here ever raises on a valid graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.ir.graph import Graph, Node
from onnxexec.ir.types import TensorType
from onnxexec.passes import symdim
from onnxexec.passes.symdim import Dim


@dataclass
class Facts:
    """What is known about one value before running the graph."""

    elem: int | None = None  # ONNX TensorProto.DataType
    shape: tuple[Dim, ...] | None = None
    sym: tuple[Dim, ...] | None = None  # elements of a 0-D / 1-D integer tensor
    value: np.ndarray | None = None  # the value itself, for constants

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def ints(self) -> tuple[int, ...] | None:
        """Elements as Python ints when all are known numbers."""
        if self.value is not None and self.value.dtype.kind in "iu" and self.value.ndim <= 1:
            return tuple(int(v) for v in self.value.reshape(-1))
        if self.sym is not None and symdim.is_static(self.sym):
            return tuple(int(v) for v in self.sym)
        return None


UNKNOWN = Facts()
Rule = Callable[[Node, list[Facts]], list[Facts]]
RULES: dict[tuple[str, str], Rule] = {}


def rule(*op_types: str, domain: str = "") -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for t in op_types:
            RULES[(domain, t)] = fn
        return fn

    return register


_ELEM: dict[np.dtype, int | None] = {}  # onnx_dtype by numpy dtype, None = no ONNX type


def const_facts(v: Any) -> Facts:
    if not isinstance(v, np.ndarray):
        return UNKNOWN
    dt = v.dtype
    elem = _ELEM.get(dt, -1)
    if elem == -1:
        try:
            elem = onnx_dtype(dt)
        except ValueError:
            elem = None
        _ELEM[dt] = elem
    sym = None
    if v.ndim <= 1 and v.size <= 64 and dt.kind in "iu":
        sym = tuple(v.reshape(-1).tolist())
    return Facts(elem, v.shape, sym, v)


def _input_facts(t: Any) -> Facts:
    if not isinstance(t, TensorType):
        return UNKNOWN
    shape = None
    if t.shape is not None:
        shape = tuple(symdim.fresh() if d is None else d for d in t.shape)
    return Facts(t.elem_type, shape)


def infer_shapes(g: Graph, outer: dict[str, Facts] | None = None) -> dict[str, Facts]:
    """Facts for every value of `g` (graph inputs, initializers, node outputs)."""
    facts: dict[str, Facts] = dict(outer or {})
    for v in g.inputs:
        facts[v.name] = _input_facts(v.type)
    names = {v.name for v in g.inputs}
    for k, v in g.initializers.items():
        c = const_facts(v)
        # An overridable initializer (also a graph input) is no constant: type only.
        facts[k] = Facts(c.elem, facts[k].shape or c.shape) if k in names else c
    for n in g.nodes:
        ins = [facts.get(i, UNKNOWN) if i else UNKNOWN for i in n.inputs]
        fn = RULES.get((n.domain, n.op_type))
        outs: list[Facts] = []
        if fn is not None:
            try:
                outs = fn(n, ins)
            except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError):
                outs = []  # an inconsistent corner: leave it unknown, the run will report it
        for j, o in enumerate(n.outputs):
            if o:
                facts[o] = outs[j] if j < len(outs) else Facts()
    return facts


# Import the rule modules for their registrations (after RULES exists).
from onnxexec.passes import shape_rules, shape_rules_image, shape_rules_nn  # noqa: E402, F401

__all__ = ["RULES", "UNKNOWN", "Facts", "const_facts", "infer_shapes", "rule"]
