"""Transposes moved past elementwise ops and merged, so the layout changes a tf2onnx
graph puts around every Conv (NHWC -> NCHW before it, back after it, the activations
and residual Adds in between on NHWC tensors) cancel out, as onnxruntime's transpose
optimizer makes them (onnxruntime/core/optimizer/transpose_optimization).

Rewrites, repeated until none applies (each is exact: an elementwise op commutes with
a permutation of its operands' axes when they all have the same rank):
- Transpose(Transpose(x, p1), p2) -> Transpose(x, p1[p2]); nothing when that is the
  identity permutation;
- U(Transpose(x, p), scalars...) -> Transpose(U(x, scalars...), p) for a unary
  elementwise U (its other inputs constants of one element) when the Transpose's
  output has no other reader;
- B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p) for a binary
  elementwise B (the old Transposes stay for their other readers, if any).
Only channel-layout permutations move (channels-first <-> channels-last, rank 3-5):
the attention fusions match Transposes of the head axes where the exporters put them.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor

_UNARY = frozenset(
    "Relu Sigmoid Tanh HardSwish HardSigmoid LeakyRelu Clip Abs Neg Exp Log Sqrt Erf "
    "Elu Selu Softplus Mish Gelu Identity".split()
)
_BINARY = frozenset("Add Sub Mul Div Max Min Pow".split())
_MAX_SWEEPS = 8  # a sweep moves each Transpose one op further; chains are short


def layout_perm(perm: tuple[int, ...]) -> bool:
    """(0, 2, ..., r-1, 1) or (0, r-1, 1, ..., r-2): channels moved last / first."""
    r = len(perm)
    last = (0, *range(2, r), 1)
    first = (0, r - 1, *range(1, r - 1))
    return 3 <= r <= 5 and perm in (last, first)


def _perm(ed: GraphEditor, name: str) -> tuple[Node, tuple[int, ...]] | None:
    t = ed.producer_op(name, "Transpose")
    if t is None or t.attrs.get("perm") is None:
        return None
    perm = tuple(t.attrs["perm"])
    return (t, perm) if layout_perm(perm) else None


def _scalar_const(ed: GraphEditor, name: str) -> bool:
    c = ed.const(name)
    return not name or (c is not None and c.size == 1 and c.ndim == 0)


def _sweep(g: Graph) -> Graph:
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain or not n.inputs or not n.inputs[0] or len(n.outputs) != 1:
            continue
        if n.op_type == "Transpose" and n.attrs.get("perm") is not None:
            inner = _perm(ed, n.inputs[0])
            if inner is None or not ed.claim([n]):
                continue
            p1, p2 = inner[1], tuple(n.attrs["perm"])
            if len(p1) != len(p2) or not layout_perm(p2):
                continue
            perm = tuple(p1[i] for i in p2)
            x = inner[0].inputs[0]
            if perm == tuple(range(len(perm))) and ed.can_alias(n.outputs[0]):
                ed.alias(n.outputs[0], x)
                ed.remove(n)
            else:
                new = Node("Transpose", (x,), n.outputs, {"perm": perm}, n.name, "")
                ed.replace([n], n, new)
        elif n.op_type in _UNARY:
            src = _perm(ed, n.inputs[0])
            if src is None or not ed.single_use(n.inputs[0]):
                continue
            if not all(_scalar_const(ed, i) for i in n.inputs[1:]):
                continue
            if not ed.claim([src[0], n]):
                continue
            _move(ed, [src[0], n], n, (src[0].inputs[0], *n.inputs[1:]), src[1])
        elif n.op_type in _BINARY and len(n.inputs) == 2:
            a, b = _perm(ed, n.inputs[0]), _perm(ed, n.inputs[1])
            if a is None or b is None or a[1] != b[1] or not ed.claim([n]):
                continue
            _move(ed, [n], n, (a[0].inputs[0], b[0].inputs[0]), a[1])
    return ed.build() if ed.changed else g


def _move(ed: GraphEditor, pattern: list[Node], n: Node, ins: tuple[str, ...], perm) -> None:
    """`n` computed on the untransposed inputs `ins`, then transposed by `perm`."""
    y = n.outputs[0]
    tmp = ed.fresh(f"{y}__pre_transpose")
    moved = Node(n.op_type, ins, (tmp,), n.attrs, n.name, n.domain)
    ed.replace(pattern, n, [moved, Node("Transpose", (tmp,), (y,), {"perm": perm}, "", "")])


def fold_transposes(g: Graph) -> Graph:
    """`g` with Transposes merged and moved past elementwise ops (`g` if none moves)."""
    if sum(1 for n in g.nodes if n.op_type == "Transpose" and not n.domain) < 2:
        return g
    for _ in range(_MAX_SWEEPS):
        new = _sweep(g)
        if new is g:
            break
        g = new
    return g
