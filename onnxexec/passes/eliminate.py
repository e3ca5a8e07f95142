"""Remove nodes that compute nothing: Identity, inference-mode Dropout, Cast /
CastLike to the type the input already has, Transpose by the identity permutation,
single-input Concat / Sum / Max / Min / Mean, Pad by constant zero pads; then dead
nodes and unused initializers.

Removing `y = Op(x)` points every reader of y at x. When y is a graph output (whose
name must survive) the producer of x is renamed to y instead, if x has no other
reader; otherwise the node stays.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor, rebuild
from onnxexec.passes._patterns import facts_of
from onnxexec.passes.shape_inference import Facts

_PASS_THROUGH = frozenset({"Identity", "Concat", "Sum", "Max", "Min", "Mean"})
_CANDIDATES = _PASS_THROUGH | {"Dropout", "Cast", "CastLike", "Transpose", "Pad"}


def _is_noop(n: Node, ed: GraphEditor, facts: dict[str, Facts]) -> bool:
    """True when output 0 always equals input 0 (and any other output is unused)."""
    if n.domain or not n.inputs or not n.inputs[0]:
        return False
    t = n.op_type
    if t == "Identity":
        return True
    if t in _PASS_THROUGH:
        return len(n.inputs) == 1 and len(n.outputs) == 1
    if t == "Dropout":
        if any(ed.n_uses(o) for o in n.outputs[1:] if o):
            return False
        opset = ed.g.opset("") or 0
        if opset < 7:
            return bool(n.attrs.get("is_test", 0))
        if opset < 12 or len(n.inputs) < 3 or not n.inputs[2]:
            return True
        mode = ed.const(n.inputs[2])  # training_mode: only a constant False is inference
        return mode is not None and not bool(mode.reshape(-1)[0])
    if t in ("Cast", "CastLike"):
        src = facts.get(n.inputs[0])
        if src is None or src.elem is None:
            return False
        to = n.attrs.get("to") if t == "Cast" else getattr(facts.get(n.inputs[1]), "elem", None)
        return to == src.elem
    if t == "Transpose":
        perm = n.attrs.get("perm")
        return perm is not None and tuple(perm) == tuple(range(len(perm)))
    if t == "Pad":  # exporters pad 1x1 convs by zero too (transformers' MobileNetV2)
        pads = n.attrs.get("pads", n.attrs.get("paddings"))
        if pads is None and len(n.inputs) > 1:
            c = ed.const(n.inputs[1])
            pads = None if c is None else c.reshape(-1).tolist()
        return pads is not None and not any(pads)
    return False


def eliminate_noops(g: Graph) -> Graph:
    """`g` without pass-through nodes (`g` itself when there is none)."""
    # One cheap walk first: most rounds find nothing, and the editor's indexes and
    # shape inference (needed for Cast only) are the expensive part.
    kinds = {n.op_type for n in g.nodes if not n.domain} & _CANDIDATES
    if not kinds:
        return g
    facts = facts_of(g) if kinds & {"Cast", "CastLike"} else {}
    ed = GraphEditor(g)
    for n in ed.nodes:
        if not _is_noop(n, ed, facts):
            continue
        x, y = n.inputs[0], n.outputs[0]
        if ed.can_alias(y):
            ed.alias(y, x)
            ed.remove(n)
            continue
        # y must keep its name: rename x's producer to y when nothing else reads x.
        p = ed.producer.get(x)
        if p is None or ed.n_uses(x) != 1 or not ed.can_alias(x) or ed.edited(p):
            continue
        src = ed.nodes[p]
        outs = tuple(y if o == x else o for o in src.outputs)
        ed.replace([src], src, Node(src.op_type, src.inputs, outs, src.attrs, src.name, src.domain))
        ed.remove(n)
    return ed.build() if ed.changed else g


def eliminate_dead(g: Graph) -> Graph:
    """`g` without nodes whose outputs nobody reads, and without unused initializers."""
    live = {v.name for v in g.outputs}
    keep: list[Node] = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs if o):
            keep.append(n)
            live.update(i for i in n.inputs if i)
            for sg in n.subgraphs():
                live |= sg.free_names()
    keep.reverse()
    inputs = {v.name for v in g.inputs}
    inits = {k: v for k, v in g.initializers.items() if k in live or k in inputs}
    if len(keep) == len(g.nodes) and len(inits) == len(g.initializers):
        return g
    return rebuild(g, keep, inits)
