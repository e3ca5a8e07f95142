"""LayerNorm and RMSNorm over the last axis -> onnxexec::FusedLayerNorm / FusedRMSNorm.

Matched (float32 only, constants for epsilon, scale and bias):
- LayerNormalization-17 / RMSNormalization-23 normalizing only the last axis, their
  statistics outputs unused;
- torch's decomposition of LayerNorm:
      m = ReduceMean(x, [-1]); d = x - m; v = ReduceMean(d^2, [-1])
      y = d / Sqrt(v + eps) [* scale] [+ bias]
  (d^2 as Pow(d, 2) or d * d; the division also as d * Reciprocal(Sqrt(.)));
- and of RMSNorm (LLaMA):  y = scale * (x * 1 / Sqrt(ReduceMean(x^2, [-1]) + eps))
  (1 / Sqrt as Reciprocal, Div(1, .), or x / Sqrt(.)).
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import (
    close,
    facts_of,
    is_float32,
    last_axis_vector,
    only_consumer,
    other_input,
    scalar_operand,
)
from onnxexec.passes.shape_inference import Facts

D = "onnxexec"


def _last_axis_mean(ed: GraphEditor, facts: dict[str, Facts], name: str) -> Node | None:
    n = ed.producer_op(name, "ReduceMean")
    if n is None or not n.attrs.get("keepdims", 1):
        return None
    axes = n.attrs.get("axes")
    if axes is None and len(n.inputs) > 1 and n.inputs[1]:
        v = ed.const(n.inputs[1])
        axes = None if v is None else tuple(int(a) for a in v.reshape(-1))
    rank = facts.get(n.inputs[0], Facts()).rank
    if axes is None or len(axes) != 1 or not (axes[0] == -1 or (rank and axes[0] == rank - 1)):
        return None
    return n


def _square_of(ed: GraphEditor, name: str) -> tuple[str, Node] | None:
    n = ed.producer_op(name, "Pow", "Mul")
    if n is None:
        return None
    if n.op_type == "Mul":
        return (n.inputs[0], n) if n.inputs[0] == n.inputs[1] else None
    s = scalar_operand(ed, n)
    return (n.inputs[0], n) if s is not None and s[0] == n.inputs[0] and close(s[1], 2.0) else None


def _inv_std(
    ed: GraphEditor, facts, var_mean: Node, d: str
) -> tuple[list[Node], Node, float] | None:
    """From ReduceMean(d^2): Add(eps) -> Sqrt, then the node computing d / sqrt(...)."""
    add = only_consumer(ed, var_mean.outputs[0], "Add")
    s = scalar_operand(ed, add) if add is not None else None
    if add is None or s is None or s[0] != var_mean.outputs[0]:
        return None
    sq = only_consumer(ed, add.outputs[0], "Sqrt")
    if sq is None:
        return None
    div = only_consumer(ed, sq.outputs[0], "Div", "Reciprocal")
    if div is None:
        return None
    if div.op_type == "Div":
        if div.inputs[1] == sq.outputs[0] and div.inputs[0] == d:
            return [add, sq, div], div, s[1]
        if div.inputs[1] == sq.outputs[0] and close(ed.scalar(div.inputs[0]), 1.0):
            inv = div
        else:
            return None
    else:
        inv = div
    mul = only_consumer(ed, inv.outputs[0], "Mul")
    if mul is None or other_input(mul, inv.outputs[0]) != d:
        return None
    return [add, sq, inv, mul], mul, s[1]


def _affine(
    ed: GraphEditor, name: str, width
) -> tuple[list[Node], Node | None, str | None, str | None]:
    """Optional Mul(scale) then Add(bias) after the normalized value."""
    nodes: list[Node] = []
    scale = bias = None
    last = None
    mul = only_consumer(ed, name, "Mul")
    if mul is not None:
        c = ed.const(other_input(mul, name) or "")
        if (
            c is not None
            and isinstance(width, int)
            and last_axis_vector(c, width) is not None
            and c.ndim <= 1
        ):
            nodes.append(mul)
            scale, last, name = other_input(mul, name), mul, mul.outputs[0]
    add = only_consumer(ed, name, "Add")
    if add is not None and scale is not None:
        c = ed.const(other_input(add, name) or "")
        if c is not None and c.ndim <= 1 and c.size == width:
            nodes.append(add)
            bias, last = other_input(add, name), add
    return nodes, last, scale, bias


def _decomposed(ed: GraphEditor, facts, n: Node) -> tuple[list[Node], Node, tuple, dict] | None:
    """Match a decomposed LayerNorm / RMSNorm whose variance ReduceMean is `n`."""
    sq = _square_of(ed, n.inputs[0])
    if sq is None:
        return None
    base, sq_node = sq
    xf = facts.get(base)
    width = xf.shape[-1] if xf is not None and xf.shape else None
    sub = ed.producer_op(base, "Sub")
    mean = _last_axis_mean(ed, facts, sub.inputs[1]) if sub is not None else None
    if mean is not None and sub is not None and mean.inputs[0] == sub.inputs[0]:
        x, rms, head = sub.inputs[0], False, [mean, sub]
    else:
        x, rms, head = base, True, []
    m = _inv_std(ed, facts, n, base)
    if m is None:
        return None
    mid, normed, eps = m
    tail, last, scale, bias = _affine(ed, normed.outputs[0], width)
    if scale is None or last is None or (rms and bias is not None):
        return None
    nodes = [*head, sq_node, n, *mid, *tail]
    if rms:
        return nodes, last, (x, scale), {"epsilon": eps}
    return nodes, last, (x, scale, bias or ""), {"epsilon": eps}


def fuse_layernorm(g: Graph) -> Graph:
    """`g` with LayerNorm / RMSNorm subgraphs as fused nodes (`g` if none)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain:
            continue
        t = n.op_type
        if t in ("LayerNormalization", "RMSNormalization"):
            rank = facts.get(n.inputs[0], Facts()).rank
            axis = n.attrs.get("axis", -1)
            last = axis == -1 or (rank and axis == rank - 1)
            if not is_float32(facts, n.inputs[0]) or not last:
                continue
            if any(ed.n_uses(o) for o in n.outputs[1:] if o) or not ed.claim([n]):
                continue
            op = "FusedLayerNorm" if t == "LayerNormalization" else "FusedRMSNorm"
            eps = n.attrs.get("epsilon", 1e-5)
            ed.replace([n], n, Node(op, n.inputs, n.outputs[:1], {"epsilon": eps}, n.name, D))
            continue
        if t != "ReduceMean" or _last_axis_mean(ed, facts, n.outputs[0]) is None:
            continue
        m = _decomposed(ed, facts, n)
        if m is None:
            continue
        nodes, anchor, ins, attrs = m
        if not is_float32(facts, ins[0]) or not ed.private(nodes, anchor) or not ed.claim(nodes):
            continue
        op = "FusedRMSNorm" if len(ins) == 2 else "FusedLayerNorm"
        ed.replace(nodes, anchor, Node(op, ins, anchor.outputs, attrs, anchor.name, D))
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g
