"""Common subexpression elimination.

Small constants with equal dtype, shape and contents get one name; then nodes with
the same op, domain, attributes and (renamed) inputs are computed once. Exporters
repeat a lot: TorchScript BERT builds the same attention-mask Where and the same
Shape/Gather/Unsqueeze chains once per layer.

Random ops and nodes with subgraphs are never merged. A node whose outputs are graph
outputs is kept (its name is part of the interface) but may serve as the survivor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes.fold_constants import NONDETERMINISTIC

_SMALL = 256  # elements: larger constants are compared by name only


def _attr_key(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes()) if v.size <= _SMALL else ("id", id(v))
    if isinstance(v, tuple):
        return tuple(_attr_key(x) for x in v)
    if isinstance(v, float) and v != v:
        return ("nan",)
    if isinstance(v, int | float | str | bytes | type(None)):
        return (type(v).__name__, v)
    return ("id", id(v))


def _attrs_key(n: Node) -> Any:
    return tuple(sorted((k, _attr_key(v)) for k, v in n.attrs.items()))


def _const_key(v: Any) -> Any:
    if not isinstance(v, np.ndarray) or v.size > _SMALL or v.dtype.kind in "OV":
        return None
    return (v.dtype.str, v.shape, v.tobytes())


def _mergeable(n: Node) -> bool:
    return bool(n.outputs) and n.op_type not in NONDETERMINISTIC and not n.subgraphs()


def _may_have_duplicates(g: Graph) -> bool:
    """False when no two constants and no two nodes could merge: the later rounds of
    the pipeline mostly find nothing, and the editor's indexes are the costly part.

    Without equal constants nothing is renamed before the first node merge, so a node
    merge needs two nodes with the very same inputs (attributes are compared later).
    """
    inputs = {v.name for v in g.inputs}
    consts: set[Any] = set()
    for name, v in g.initializers.items():
        key = None if name in inputs else _const_key(v)
        if key is not None:
            if key in consts:
                return True
            consts.add(key)
    groups: set[Any] = set()
    for n in g.nodes:
        if _mergeable(n):
            key = (n.domain, n.op_type, n.inputs, len(n.outputs))
            if key in groups:
                return True
            groups.add(key)
    return False


def cse(g: Graph) -> Graph:
    """`g` with duplicate constants and duplicate nodes merged (`g` if none)."""
    if not _may_have_duplicates(g):
        return g
    ed = GraphEditor(g)
    canon: dict[str, str] = {}
    seen_const: dict[Any, str] = {}
    for name in g.initializers:
        key = _const_key(ed.const(name))
        if key is None:
            continue
        if key in seen_const and ed.can_alias(name):
            canon[name] = seen_const[key]
            ed.alias(name, seen_const[key])
        else:
            seen_const.setdefault(key, name)
    # Nodes grouped by (domain, op, inputs, output count); attribute keys (costly for
    # the long attribute lists of tree ensembles) only once a group has two nodes.
    seen: dict[Any, list[list[Any]]] = {}
    for n in ed.nodes:
        if not _mergeable(n):
            continue
        ins = tuple(canon.get(i, i) for i in n.inputs)
        group = seen.setdefault((n.domain, n.op_type, ins, len(n.outputs)), [])
        if not group:
            group.append([None, n])
            continue
        attrs = _attrs_key(n)
        first = None
        for entry in group:
            if entry[0] is None:
                entry[0] = _attrs_key(entry[1])
            if entry[0] == attrs:
                first = entry[1]
                break
        if first is None:
            group.append([attrs, n])
            continue
        outs = [(o, f) for o, f in zip(n.outputs, first.outputs, strict=True) if o]
        if any(not f for _, f in outs) or not all(ed.can_alias(o) for o, _ in outs):
            continue
        for o, f in outs:
            canon[o] = f
            ed.alias(o, f)
        ed.remove(n)
    return ed.build() if ed.changed else g
