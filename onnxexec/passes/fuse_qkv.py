"""Sibling products of one input -> onnxexec::FusedMatMulGroup (ORT_ENABLE_ALL layout).

Transformer layers multiply one activation by several weights: the Q, K and V
projections, Llama's gate and up projections. Each product is a threaded job whose
hand-off and operand packing cost about the same whatever its width, so the narrow
ones (a GQA model's K and V: 576 -> 192) run far below the wide ones' speed. Their
weights are concatenated once, column-wise, into one (K, N1 + N2 + ...) constant,
and one product computes every output; output i is column block i, a view.

Members: FusedMatMul nodes reading the same input with a constant 2-D float32 weight
(transB is folded into the concatenated copy) and an optional constant per-column
bias. Activations: the members without one plus those sharing the first fused
activation met (same name, alpha, beta); the activated ones go first so that one
column range [0, hi) takes the activation. Runs after the fusions (its node is opaque
to their patterns) and before prepack.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor

D = "onnxexec"


def _weight(ed: GraphEditor, n: Node) -> np.ndarray | None:
    """The member's weight as (K, N) float32, or None when `n` cannot join a group."""
    if n.domain != D or n.op_type != "FusedMatMul" or len(n.outputs) != 1:
        return None
    w = ed.const(n.inputs[1]) if len(n.inputs) > 1 else None
    if w is None or w.ndim != 2 or w.dtype != np.float32 or n.attrs.get("transB", 0) not in (0, 1):
        return None
    w = w.T if n.attrs.get("transB", 0) else w
    if len(n.inputs) > 2 and n.inputs[2]:
        b = ed.const(n.inputs[2])
        if b is None or b.dtype != np.float32 or b.size != w.shape[1]:
            return None
    return w


def _act(n: Node) -> tuple[str, float, float]:
    a = n.attrs
    return (a.get("activation", ""), float(a.get("alpha", 0.0)), float(a.get("beta", 0.0)))


def _group(ed: GraphEditor, members: list[Node]) -> list[Node]:
    """The members that can share one activation, activated ones first."""
    acts = [_act(n) for n in members]
    first = next((a for a in acts if a[0]), None)
    on = [n for n, a in zip(members, acts, strict=True) if first and a == first]
    off = [n for n, a in zip(members, acts, strict=True) if not a[0]]
    return on + off


def fuse_qkv(g: Graph) -> Graph:
    """`g` with sibling FusedMatMul nodes merged (`g` if no input feeds two)."""
    ed = GraphEditor(g)
    by_input: dict[str, list[Node]] = {}
    weights: dict[int, np.ndarray] = {}
    for n in ed.nodes:
        w = _weight(ed, n)
        if w is not None and n.inputs[0]:
            by_input.setdefault(n.inputs[0], []).append(n)
            weights[id(n)] = w
    for members in by_input.values():
        group = _group(ed, members)
        k = {weights[id(n)].shape[0] for n in group}
        if len(group) < 2 or len(k) != 1 or not ed.claim(group):
            continue
        ws = [weights[id(n)] for n in group]
        w_name = ed.add_const(f"{group[0].inputs[1]}__group", np.ascontiguousarray(np.hstack(ws)))
        ins = [group[0].inputs[0], w_name]
        if any(len(n.inputs) > 2 and n.inputs[2] for n in group):
            parts = [
                ed.inits[n.inputs[2]].reshape(-1)  # a float32 constant: _weight checked it
                if len(n.inputs) > 2 and n.inputs[2]
                else np.zeros(ws[i].shape[1], np.float32)
                for i, n in enumerate(group)
            ]
            ins.append(ed.add_const(f"{group[0].outputs[0]}__bias", np.concatenate(parts)))
        act, alpha, beta = _act(group[0])
        attrs = {
            "splits": tuple(int(x.shape[1]) for x in ws),
            "activation": act,
            "alpha": alpha,
            "beta": beta,
            "activated": sum(1 for n in group if _act(n)[0]),
        }
        outs = tuple(n.outputs[0] for n in group)
        # At the first member's place: its inputs are the shared input and constants,
        # so every member's readers still come after it.
        first = min(group, key=ed.index)
        for n in group:
            if n is not first:
                ed.remove(n)
        ed.replace([first], first, Node("FusedMatMulGroup", tuple(ins), outs, attrs, first.name, D))
        _drop_unused(ed, group)
    return ed.build() if ed.changed else g


def _drop_unused(ed: GraphEditor, group: list[Node]) -> None:
    """Forget the members' own weights and biases when nothing else reads them (the
    concatenated copies replace them; keeping both would double the resident weights)."""
    names = {x for n in group for x in n.inputs[1:] if x}
    for name in names:
        uses = sum(1 for n in group for x in n.inputs if x == name)
        if (
            ed.n_uses(name) == uses
            and name not in ed.graph_inputs
            and name not in ed.subgraph_reads
        ):
            ed.inits.pop(name, None)
