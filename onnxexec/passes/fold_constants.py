"""Constant folding: run each node whose inputs are all constants once, at plan
time, with the same handler the executor would call, and store its outputs as
initializers. Constant nodes become initializers the same way.

Not folded: random ops (a new draw per run), nodes with subgraphs, nodes whose
handler is missing or raises (the run reports the error as usual), non-tensor
results (sequences, maps), and results far larger than their inputs (Expand /
ConstantOfShape / Tile would trade a cheap op for resident memory).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.ops.registry import resolve
from onnxexec.passes._editor import GraphEditor

NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)
# Quantized weights stay quantized: their consumers (or a later fusion) want them so.
_KEEP = frozenset({"DequantizeLinear", "DynamicQuantizeLinear"})
_GROWTH_LIMIT = 1 << 20  # bytes a folded result may exceed its inputs by
_DEFAULT_OPSETS = {"onnxexec": 1}


def run_node(n: Node, g: Graph, args: list[Any]) -> tuple[np.ndarray, ...] | None:
    """Outputs of `n` on `args` through its registered handler, or None if it cannot run."""
    opset = g.opset(n.domain) or _DEFAULT_OPSETS.get(n.domain)
    if opset is None:
        return None
    h = resolve(n.domain, n.op_type, opset)
    if h is None or "run_graph" in h.wants:
        return None
    kwargs: dict[str, Any] = {}
    for k, v in n.attrs.items():
        if k not in h.attributes and not h.accepts_any_attribute:
            return None
        kwargs[k] = v
    if h.required_attributes - set(kwargs):
        return None
    if "num_outputs" in h.wants:
        kwargs["num_outputs"] = len(n.outputs)
    if "outputs_used" in h.wants:
        kwargs["outputs_used"] = tuple(bool(o) for o in n.outputs)
    if "opset" in h.wants:
        kwargs["opset"] = opset
    try:
        with np.errstate(all="ignore"):
            out = h.fn(*args, **kwargs)
    except Exception:  # the executor will raise it with full context
        return None
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) < sum(1 for o in n.outputs if o):
        return None
    if not all(isinstance(v, np.ndarray) for v, o in zip(outs, n.outputs, strict=False) if o):
        return None
    return outs


def _foldable(n: Node) -> bool:
    return (
        n.op_type not in NONDETERMINISTIC
        and n.op_type not in _KEEP
        and not any(True for _ in n.subgraphs())
    )


def fold_constants(g: Graph) -> Graph:
    """`g` with every all-constant node replaced by initializers (`g` if none)."""
    ed = GraphEditor(g)
    for n in ed.nodes:
        if not _foldable(n) or not any(n.outputs):
            continue
        args = [ed.const(i) if i else None for i in n.inputs]
        if any(a is None for a, i in zip(args, n.inputs, strict=True) if i):
            continue
        outs = run_node(n, g, args)
        if outs is None:
            continue
        in_bytes = sum(a.nbytes for a in args if a is not None)
        out_bytes = sum(v.nbytes for v, o in zip(outs, n.outputs, strict=False) if o)
        if n.op_type != "Constant" and out_bytes > in_bytes + _GROWTH_LIMIT:
            continue
        for o, v in zip(n.outputs, outs, strict=False):
            if o:
                ed.inits[o] = v
        ed.remove(n)
    return ed.build() if ed.changed else g
