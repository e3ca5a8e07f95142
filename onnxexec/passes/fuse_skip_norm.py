"""Residual Add before a fused norm -> the norm's skip input (onnxruntime's
SkipLayerNormalization): FusedLayerNorm(Add(a, b)) -> FusedLayerNorm(a, ..., skip=b),
with the sum as the norm's second output when something else reads it (pre-LN
transformers keep adding to the residual stream).

Both operands must have the same (symbolic) shape, and every other reader of the sum
must come after the norm, so the graph stays in topological order.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import facts_of, is_float32

D = "onnxexec"


def fuse_skip_norm(g: Graph) -> Graph:
    """`g` with residual Adds folded into the FusedLayerNorm / FusedRMSNorm after them."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain != D or n.op_type not in ("FusedLayerNorm", "FusedRMSNorm"):
            continue
        skip_at = 3 if n.op_type == "FusedLayerNorm" else 2
        if len(n.inputs) > skip_at or len(n.outputs) > 1:
            continue
        add = ed.producer_op(n.inputs[0], "Add")
        if add is None or any(ed.const(i) is not None for i in add.inputs):
            continue
        fa, fb = facts.get(add.inputs[0]), facts.get(add.inputs[1])
        if fa is None or fb is None or fa.shape is None or fa.shape != fb.shape:
            continue
        if not (is_float32(facts, add.inputs[0]) and is_float32(facts, add.inputs[1])):
            continue
        s = add.outputs[0]
        me = ed.index(n)
        others = [u for u in ed.users.get(s, ()) if u != me]
        if any(u < me for u in others) or s in ed.subgraph_reads or not ed.claim([add, n]):
            continue
        keep = bool(others) or s in ed.graph_outputs
        ins = list(n.inputs)
        ins[0] = add.inputs[0]
        while len(ins) < skip_at:
            ins.append("")
        ins.append(add.inputs[1])
        outs = (n.outputs[0], s) if keep else n.outputs
        ed.replace([add, n], n, Node(n.op_type, tuple(ins), outs, n.attrs, n.name, D))
    return ed.build() if ed.changed else g
