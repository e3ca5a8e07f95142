"""Chains of elementwise float32 ops -> one onnxexec::FusedElementwise (one pass over
memory instead of one per op).

A node joins the chain of its single consumer when that consumer is elementwise too
(kernels.math.ewise.OPS: arithmetic, Max / Min of two, Neg, Abs, Relu, Sigmoid, Tanh, Exp,
Sqrt, Reciprocal, Erf) and its output is read nowhere else. Scalar constants become
program constants; every other input is read with numpy broadcasting. Chains of one
node are left alone.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.kernels.math.ewise_ops import BINARY, OPS
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import facts_of, is_float32

D = "onnxexec"


def _elementwise(n: Node, facts) -> bool:
    if n.domain or n.op_type not in OPS or len(n.outputs) != 1 or n.attrs:
        return False
    arity = 2 if n.op_type in BINARY else 1
    return len(n.inputs) == arity and all(n.inputs) and is_float32(facts, n.outputs[0])


def _compile(ed: GraphEditor, chain: list[Node]) -> tuple[list[str], dict]:
    inside = {n.outputs[0] for n in chain}
    ext: list[str] = []
    consts: list[float] = []
    for n in chain:
        for i in n.inputs:
            if i in inside or i in ext:
                continue
            c = ed.const(i)
            if c is not None and c.size == 1 and c.dtype.kind == "f" and c.ndim == 0:
                continue
            ext.append(i)
    reg: dict[str, int] = {name: k for k, name in enumerate(ext)}
    const_reg: dict[str, int] = {}
    for n in chain:
        for i in n.inputs:
            if i not in reg and i not in inside and i not in const_reg:
                const_reg[i] = len(ext) + len(consts)
                c = ed.const(i)
                assert c is not None  # the chain's inputs are outside values or constants
                consts.append(float(c.reshape(-1)[0]))
    reg.update(const_reg)
    prog: list[int] = []
    nxt = len(ext) + len(consts)
    for n in chain:
        a = reg[n.inputs[0]]
        b = reg[n.inputs[1]] if len(n.inputs) > 1 else a
        reg[n.outputs[0]] = nxt
        prog += [OPS[n.op_type], nxt, a, b]
        nxt += 1
    attrs = {
        "program": tuple(prog),
        "constants": tuple(consts),
        "result": reg[chain[-1].outputs[0]],
        "registers": nxt,
    }
    return ext, attrs


def fuse_elementwise(g: Graph) -> Graph:
    """`g` with elementwise chains as FusedElementwise nodes (`g` if none)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    group: dict[int, list[Node]] = {}  # index of a chain's last node -> its nodes
    # owner: node index -> an index on the way to its chain's last node (union-find
    # with path halving). Relabelling every member at each merge made a 20k-node chain
    # quadratic; every member but a chain's last was checked single-use as it joined.
    owner: dict[int, int] = {}

    def head_of(k: int) -> int:
        while owner[k] != k:
            owner[k] = owner[owner[k]]
            k = owner[k]
        return k

    for i, n in enumerate(ed.nodes):
        if not _elementwise(n, facts):
            continue
        chain: list[Node] = []
        for x in dict.fromkeys(n.inputs):
            p = ed.producer.get(x)
            if p is not None and p in owner and ed.single_use(x) and head_of(p) in group:
                part = group.pop(head_of(p))
                owner[p] = i
                # two independent chains may go in either order: extend the longer
                chain, part = (chain, part) if len(chain) >= len(part) else (part, chain)
                chain.extend(part)
        chain.append(n)
        group[i] = chain
        owner[i] = i
    for chain in group.values():
        if len(chain) < 2 or not ed.claim(chain):
            continue
        anchor = chain[-1]
        if not ed.private(chain, anchor):
            continue
        ins, attrs = _compile(ed, chain)
        ed.replace(
            chain,
            anchor,
            Node("FusedElementwise", tuple(ins), anchor.outputs, attrs, anchor.name, D),
        )
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g
