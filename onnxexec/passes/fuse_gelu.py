"""GELU -> onnxexec::FusedGelu (float32 only), optionally with the bias Add before it.

Forms matched (any association / operand order of the products):
- erf:  x * 0.5 * (1 + Erf(x / sqrt2))   (or Erf(x * 1/sqrt2))
- tanh: x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (x^3 as Pow(x, 3)
        or x * x * x)
- Gelu-20 (approximate none / tanh) after a MatMul / Gemm / Conv (+ bias), which the
  later passes turn into that product's activation.
Then Add(x, bias) -> FusedGelu becomes FusedGelu(x, bias) when bias is a constant on
the last axis (a MatMul before it is better served by fuse_matmul + fuse_activation,
which run later and take FusedGelu without bias).
"""

from __future__ import annotations

import math

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

D = "onnxexec"
_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _half_product(ed: GraphEditor, a: str, x: str) -> tuple[list[Node], Node, int] | None:
    """Match the Mul tree computing x * a * 0.5 from value `a`: (its nodes, its last node,
    1 if x * a is rounded before the halving: it overflows for x > float32 max / 2)."""
    m1 = only_consumer(ed, a, "Mul")
    if m1 is None:
        return None
    o = other_input(m1, a)
    if o is None:
        return None
    if o == x:  # (x * a) * 0.5
        m2 = only_consumer(ed, m1.outputs[0], "Mul")
        if m2 is not None and close((scalar_operand(ed, m2) or (None, None))[1], 0.5):
            return [m1, m2], m2, 1
        return None
    if close(ed.scalar(o), 0.5):  # (a * 0.5) * x
        m2 = only_consumer(ed, m1.outputs[0], "Mul")
        if m2 is not None and other_input(m2, m1.outputs[0]) == x:
            return [m1, m2], m2, 0
        return None
    m0 = ed.producer_op(o, "Mul")  # (x * 0.5) * a
    if m0 is not None and ed.single_use(o):
        s = scalar_operand(ed, m0)
        if s is not None and s[0] == x and close(s[1], 0.5):
            return [m0, m1], m1, 0
    return None


def _one_plus(ed: GraphEditor, name: str) -> Node | None:
    add = only_consumer(ed, name, "Add")
    s = scalar_operand(ed, add) if add is not None else None
    return add if s is not None and s[0] == name and close(s[1], 1.0) else None


def _erf_form(ed: GraphEditor, erf: Node) -> tuple[str, list[Node], Node, int] | None:
    arg = ed.producer_op(erf.inputs[0], "Div", "Mul")
    if arg is None or not ed.single_use(erf.inputs[0]):
        return None
    s = scalar_operand(ed, arg)
    if s is None or not (close(s[1], _SQRT2) if arg.op_type == "Div" else close(s[1], 1 / _SQRT2)):
        return None
    if arg.op_type == "Div" and ed.const(arg.inputs[1]) is None:
        return None  # c / x, not x / c
    x = s[0]
    add = _one_plus(ed, erf.outputs[0])
    tree = _half_product(ed, add.outputs[0], x) if add is not None else None
    if add is None or tree is None:
        return None
    return x, [arg, erf, add, *tree[0]], tree[1], tree[2]


def _cube_of(ed: GraphEditor, name: str) -> str | None:
    p = ed.producer_op(name, "Pow")
    if p is not None:
        s = scalar_operand(ed, p)
        return s[0] if s is not None and s[0] == p.inputs[0] and close(s[1], 3.0) else None
    m = ed.producer_op(name, "Mul")
    if m is None:
        return None
    inner = ed.producer_op(m.inputs[0], "Mul") or ed.producer_op(m.inputs[1], "Mul")
    if inner is None or inner.inputs[0] != inner.inputs[1]:
        return None
    x = inner.inputs[0]
    return x if x in m.inputs else None


def _tanh_form(ed: GraphEditor, tanh: Node) -> tuple[str, list[Node], Node, int] | None:
    k = ed.producer_op(tanh.inputs[0], "Mul")
    ks = scalar_operand(ed, k) if k is not None else None
    if ks is None or not close(ks[1], _SQRT_2_OVER_PI):
        return None
    inner = ed.producer_op(ks[0], "Add")
    if inner is None:
        return None
    for x_in, c_in in (inner.inputs, inner.inputs[::-1]):
        cm = ed.producer_op(c_in, "Mul")
        cs = scalar_operand(ed, cm) if cm is not None else None
        if cm is None or cs is None or not close(cs[1], 0.044715):
            continue
        if _cube_of(ed, cs[0]) != x_in:
            continue
        cube = ed.node_of(cs[0])
        add = _one_plus(ed, tanh.outputs[0])
        tree = _half_product(ed, add.outputs[0], x_in) if add is not None else None
        if cube is None or k is None or add is None or tree is None:
            return None
        cube_nodes = [cube]
        if cube.op_type == "Mul":
            square = ed.node_of(next(i for i in cube.inputs if i != x_in))
            if square is None:
                return None
            cube_nodes.insert(0, square)
        return x_in, [*cube_nodes, cm, inner, k, tanh, add, *tree[0]], tree[1], tree[2]
    return None


def _joins_product(ed: GraphEditor, gelu: Node) -> bool:
    """Whether a Gelu-20 node will merge with what computes its input (a product, or a
    bias Add): a lone Gelu keeps its exact handler rather than the kernel's erf
    approximation (|error| < 1e-6)."""
    src = ed.producer_op(gelu.inputs[0], "MatMul", "Gemm", "Add", "Conv")
    if src is None or src.op_type != "Add":
        return src is not None
    return any(
        ed.producer_op(i, "MatMul", "Gemm") is not None or ed.const(i) is not None
        for i in src.inputs
    )


def _to_gelu(g: Graph) -> Graph:
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain:
            continue
        if (
            n.op_type == "Gelu"
            and is_float32(facts, n.inputs[0])
            and _joins_product(ed, n)
            and ed.claim([n])
        ):
            ed.replace(
                [n],
                n,
                Node(
                    "FusedGelu",
                    n.inputs[:1],
                    n.outputs,
                    {"approximate": n.attrs.get("approximate", "none")},
                    n.name,
                    D,
                ),
            )
            continue
        m = (
            _erf_form(ed, n)
            if n.op_type == "Erf"
            else (_tanh_form(ed, n) if n.op_type == "Tanh" else None)
        )
        if m is None or not is_float32(facts, m[0]):
            continue
        x, nodes, anchor, product_first = m
        if not ed.private(nodes, anchor) or not ed.claim(nodes):
            continue
        attrs: dict[str, str | int] = {"approximate": "none" if n.op_type == "Erf" else "tanh"}
        if product_first:
            attrs["product_first"] = 1
        ed.replace(nodes, anchor, Node("FusedGelu", (x,), anchor.outputs, attrs, anchor.name, D))
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g


def _bias_gelu(g: Graph) -> Graph:
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain != D or n.op_type != "FusedGelu" or len(n.inputs) > 1:
            continue
        add = ed.producer_op(n.inputs[0], "Add")
        if add is None or not ed.single_use(n.inputs[0]):
            continue
        src = ed.producer_op(add.inputs[0], "MatMul") or ed.producer_op(add.inputs[1], "MatMul")
        if src is not None:
            continue  # fuse_matmul takes the bias, fuse_activation the Gelu
        s = scalar_operand(ed, add)
        c = next((ed.const(i) for i in add.inputs if ed.const(i) is not None), None)
        x = next((i for i in add.inputs if ed.const(i) is None), None)
        xf = facts.get(x) if x else None
        if s is not None or c is None or x is None or xf is None or not xf.shape:
            continue
        d = xf.shape[-1]
        vec = last_axis_vector(c, d) if isinstance(d, int) and c.ndim <= len(xf.shape) else None
        if vec is None or not ed.claim([add, n]):
            continue
        b = ed.add_const(f"{n.outputs[0]}__bias", vec)
        ed.replace([add, n], n, Node("FusedGelu", (x, b), n.outputs, n.attrs, n.name, D))
    return ed.build() if ed.changed else g


def fuse_gelu(g: Graph) -> Graph:
    """`g` with GELU subgraphs as FusedGelu nodes (`g` if there are none)."""
    return _bias_gelu(_to_gelu(g))
