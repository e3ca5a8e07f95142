"""Conv -> onnxexec::FusedConv (+ a residual Add of the same shape as its 4th input),
then FusedMatMul / FusedConv followed by an activation -> the same node with
`activation` set (float32 only).

Activations: Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid, HardSwish, Clip with
constant bounds (ReLU6), Gelu-20 / FusedGelu without bias (erf or tanh), and SiLU
written as Mul(y, Sigmoid(y)). The producer's output must have no other reader
(except the Sigmoid of the SiLU pattern).
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import (
    facts_of,
    float32_operands,
    is_float32,
    only_consumer,
    other_input,
)

D = "onnxexec"
_SIMPLE = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "HardSwish": "HardSwish"}


def _conv_to_fused(g: Graph) -> Graph:
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.op_type == "Conv" and not n.domain and float32_operands(ed, facts, *n.inputs[:2]):
            ed.replace([n], n, Node("FusedConv", n.inputs, n.outputs, n.attrs, n.name, D))
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g


def _activation(ed: GraphEditor, act: Node) -> tuple[str, float, float] | None:
    t, a = act.op_type, act.attrs
    if act.domain == D:
        if t == "FusedGelu" and (len(act.inputs) < 2 or not act.inputs[1]):
            name = "Gelu" if a.get("approximate", "none") == "none" else "GeluTanh"
            return name, float(bool(a.get("product_first", 0))), 0.0
        return None
    if act.domain:
        return None
    if t in _SIMPLE:
        return _SIMPLE[t], 0.0, 0.0
    if t == "LeakyRelu":
        return "LeakyRelu", float(a.get("alpha", 0.01)), 0.0
    if t == "HardSigmoid":
        return "HardSigmoid", float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if t == "Gelu":
        return ("Gelu" if a.get("approximate", "none") == "none" else "GeluTanh", 0.0, 0.0)
    if t == "Clip":
        if "min" in a or "max" in a:  # opset < 11: bounds are attributes
            return "Clip", float(a.get("min", -3.4e38)), float(a.get("max", 3.4e38))
        lo = ed.scalar(act.inputs[1]) if len(act.inputs) > 1 and act.inputs[1] else -3.4e38
        hi = ed.scalar(act.inputs[2]) if len(act.inputs) > 2 and act.inputs[2] else 3.4e38
        if lo is None or hi is None:
            return None
        return "Clip", lo, hi
    return None


def _conv_residual(g: Graph) -> Graph:
    """FusedConv -> Add(other) of the same shape -> FusedConv(x, w, b, other): the
    residual is added in the conv's epilogue (ResNet's and MobileNetV2's skip Adds)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain != D or n.op_type != "FusedConv" or len(n.inputs) > 3:
            continue
        if n.attrs.get("activation", ""):
            continue
        add = only_consumer(ed, n.outputs[0], "Add")
        other = other_input(add, n.outputs[0]) if add is not None else None
        if add is None or other is None or other == n.outputs[0] or ed.const(other) is not None:
            continue
        fy, fo = facts.get(n.outputs[0]), facts.get(other)
        if fy is None or fo is None or fy.shape is None or fy.shape != fo.shape:
            continue
        if not is_float32(facts, other) or not ed.claim([n, add]):
            continue
        ins = (*n.inputs, *([""] * (3 - len(n.inputs))), other)
        ed.replace([n, add], add, Node("FusedConv", ins, add.outputs, n.attrs, n.name, D))
    return ed.build() if ed.changed else g


def fuse_activation(g: Graph) -> Graph:
    """`g` with activations folded into the FusedMatMul / FusedConv before them."""
    g = _conv_residual(_conv_to_fused(g))
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain != D or n.op_type not in ("FusedMatMul", "FusedConv"):
            continue
        if n.attrs.get("activation", ""):
            continue
        y = n.outputs[0]
        users = ed.consumers(y)
        pattern: list[Node] = []
        found = None
        if len(users) == 1 and ed.single_use(y):
            found = _activation(ed, users[0])
            pattern = [users[0]]
        elif len(users) == 2 and ed.n_uses(y) == 2:
            sig = next((u for u in users if u.op_type == "Sigmoid" and not u.domain), None)
            mul = next((u for u in users if u.op_type == "Mul" and not u.domain), None)
            if (
                sig is not None
                and mul is not None
                and only_consumer(ed, sig.outputs[0], "Mul") is mul
                and other_input(mul, y) == sig.outputs[0]
            ):
                found = ("Silu", 0.0, 0.0)
                pattern = [sig, mul]
        if found is None or not ed.claim([n, *pattern]):
            continue
        anchor = pattern[-1]
        name, alpha, beta = found
        attrs = dict(n.attrs, activation=name, alpha=alpha, beta=beta)
        ed.replace(
            [n, *pattern], anchor, Node(n.op_type, n.inputs, anchor.outputs[:1], attrs, n.name, D)
        )
    return ed.build() if ed.changed else g
