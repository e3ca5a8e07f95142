"""Rotary position embedding, rotate-half form -> onnxexec::FusedRotary (float32, rank 4).

Matches what transformers' apply_rotary_pos_emb exports (TorchScript and dynamo):
      x1 = Slice(x, 0, D/2, axis -1)       x2 = Slice(x, D/2, D, axis -1)
      rot = Concat(Neg(x2), x1, axis -1)
      y = Add(Mul(x, cos), Mul(rot, sin))  (either operand order of each Add / Mul)
for x of shape (B, H, T, D), D even, cos / sin broadcasting to x's shape. Five nodes
(two Slices, Neg, Concat and the Mul / Mul / Add chain) and their intermediates become
one pass over x.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import facts_of, is_float32, other_input
from onnxexec.passes.shape_inference import Facts

D = "onnxexec"
_BIG = 2**31 - 1  # an end at or past the axis length (exporters write INT64_MAX)


def _last_axis(ed: GraphEditor, sl: Node, rank: int) -> tuple[int, int] | None:
    """(start, end) of a Slice along the last axis with step 1, else None."""
    if len(sl.inputs) < 3:
        return None
    vals = [ed.const(i) if i else None for i in sl.inputs[1:5]]
    starts, ends = vals[0], vals[1]
    axes = vals[2] if len(vals) > 2 and sl.inputs[3:4] and sl.inputs[3] else None
    steps = vals[3] if len(vals) > 3 and sl.inputs[4:5] and sl.inputs[4] else None
    if starts is None or ends is None or starts.size != 1 or ends.size != 1:
        return None
    if len(sl.inputs) > 3 and sl.inputs[3] and (axes is None or axes.size != 1):
        return None
    axis = int(axes.reshape(-1)[0]) if axes is not None else 0
    if axis not in (-1, rank - 1):
        return None
    if len(sl.inputs) > 4 and sl.inputs[4] and (steps is None or steps.reshape(-1)[0] != 1):
        return None
    return int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0])


def _rotated(ed: GraphEditor, facts: dict[str, Facts], rot: str) -> tuple[str, list[Node]] | None:
    """(x, nodes) when rot = Concat(Neg(x[..., h:]), x[..., :h], axis -1)."""
    cat = ed.producer_op(rot, "Concat")
    if cat is None or len(cat.inputs) != 2 or not ed.single_use(rot):
        return None
    neg = ed.producer_op(cat.inputs[0], "Neg")
    s2 = ed.producer_op(neg.inputs[0], "Slice") if neg is not None else None
    s1 = ed.producer_op(cat.inputs[1], "Slice")
    if s1 is None or s2 is None or neg is None or s1.inputs[0] != s2.inputs[0]:
        return None
    x = s1.inputs[0]
    fx = facts.get(x)
    if fx is None or fx.shape is None or len(fx.shape) != 4 or not isinstance(fx.shape[3], int):
        return None
    d = fx.shape[3]
    if d % 2 or cat.attrs.get("axis") not in (-1, 3):
        return None
    r1, r2 = _last_axis(ed, s1, 4), _last_axis(ed, s2, 4)
    h = d // 2
    if r1 is None or r2 is None or r1 not in ((0, h), (-d, h), (0, -h)):
        return None
    if r2[0] not in (h, -h) or not (r2[1] >= d or r2[1] >= _BIG):
        return None
    return x, [s1, s2, neg, cat]


def fuse_rope(g: Graph) -> Graph:
    """`g` with rotate-half rotary embeddings as FusedRotary nodes (`g` if none)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for add in ed.nodes:
        if add.op_type != "Add" or add.domain or len(add.inputs) != 2:
            continue
        for p, q in (add.inputs, add.inputs[::-1]):
            m1, m2 = ed.producer_op(p, "Mul"), ed.producer_op(q, "Mul")
            if m1 is None or m2 is None or m1 is m2:
                continue
            if not (ed.single_use(p) and ed.single_use(q)):
                continue
            match = None
            for rot in m2.inputs:
                r = _rotated(ed, facts, rot)
                if r is None:
                    continue
                x, nodes = r
                cos, sin = other_input(m1, x), other_input(m2, rot)
                if cos is not None and sin is not None and x in m1.inputs:
                    match = x, cos, sin, nodes
                    break
            if match is None:
                continue
            x, cos, sin, nodes = match
            fy, fx = facts.get(add.outputs[0]), facts.get(x)
            if not all(is_float32(facts, v) for v in (x, cos, sin, add.outputs[0])):
                continue
            if fy is None or fx is None or fy.shape != fx.shape:
                continue
            pattern = [*nodes, m1, m2, add]
            if not ed.private(pattern, add) or not ed.claim(pattern):
                continue
            fused = Node("FusedRotary", (x, cos, sin), add.outputs, {}, add.name, D)
            ed.replace(pattern, add, fused)
            break
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g
