"""Scaled dot-product attention -> onnxexec::FusedAttention (float32, rank-4 heads).

Anchored at the MatMul(P, V) of
      S = MatMul(Q [* a], K^T [* b]) [* c | / c] [+ mask]
      P = Softmax(S, axis=-1)            [then Where(IsNaN(P), 0, P): nan_to_zero]
      O = MatMul(P, V)
with scalar constants a, b, c (torch's SDPA export scales Q and K^T by sqrt(scale)
each). The mask is any float tensor broadcastable to the scores. K^T is passed as
computed (a Transpose is a free view for the kernel).

Grouped-query attention: when K^T is Transpose(Reshape(Expand(Unsqueeze(k, 2))))
(transformers' repeat_kv) and V likewise, the kernel reads the Hkv-head k and v
directly and maps query head h to kv head h // (H / Hkv), skipping both copies.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import facts_of, is_float32, only_consumer, scalar_operand
from onnxexec.passes.shape_inference import Facts

D = "onnxexec"


def _strip_scale(ed: GraphEditor, name: str) -> tuple[str, float, list[Node]]:
    """Follow one Mul / Div by a scalar constant back from `name`: (source, factor, nodes).

    One only, and only on the scores: the kernel scales Q K^T once, so scales of Q and K
    (or several on the scores) would be folded into one product, which overflows where
    the graph's separately rounded ones do not (Q * a and K^T * b stay graph nodes)."""
    factor, nodes = 1.0, list[Node]()
    while not nodes:
        n = ed.producer_op(name, "Mul", "Div")
        s = scalar_operand(ed, n) if n is not None else None
        if n is None or s is None or not ed.single_use(name) or s[1] == 0.0:
            return name, factor, nodes
        if n.op_type == "Div" and ed.const(n.inputs[1]) is None:
            return name, factor, nodes
        factor *= s[1] if n.op_type == "Mul" else 1.0 / s[1]
        nodes.append(n)
        name = s[0]
    return name, factor, nodes


def _repeat_kv_source(ed: GraphEditor, facts: dict[str, Facts], name: str) -> str | None:
    """k (B, Hkv, S, Dh) if `name` is Reshape(Expand(Unsqueeze(k, [2]), (B, Hkv, r, S, Dh)),
    (B, Hkv * r, S, Dh)), else None."""
    rs = ed.producer_op(name, "Reshape")
    ex = ed.producer_op(rs.inputs[0], "Expand") if rs is not None else None
    un = ed.producer_op(ex.inputs[0], "Unsqueeze") if ex is not None else None
    if rs is None or ex is None or un is None:
        return None
    axes = un.attrs.get("axes")
    if axes is None and len(un.inputs) > 1:
        v = ed.const(un.inputs[1])
        axes = None if v is None else tuple(int(a) for a in v.reshape(-1))
    k = facts.get(un.inputs[0])
    e = facts.get(ex.outputs[0])
    r = facts.get(rs.outputs[0])
    if axes not in ((2,), (-3,)) or k is None or e is None or r is None:
        return None
    if k.shape is None or e.shape is None or r.shape is None or len(k.shape) != 4:
        return None
    if len(e.shape) != 5 or len(r.shape) != 4:
        return None
    b, hkv, s, dh = k.shape
    if (e.shape[0], e.shape[1], e.shape[3], e.shape[4]) != (b, hkv, s, dh):
        return None
    if (r.shape[0], r.shape[2], r.shape[3]) != (b, s, dh):
        return None
    rep = e.shape[2]
    if not (isinstance(rep, int) and isinstance(hkv, int) and r.shape[1] == hkv * rep):
        return None
    return un.inputs[0]


def _untransposed(ed: GraphEditor, facts: dict[str, Facts], kt: str) -> str | None:
    """k with kt == k.transpose(0, 1, 3, 2), for kt = Transpose(k, (0, 1, 3, 2)) or the
    dynamo export's Reshape(Transpose(Reshape(k, (-1, S, D)), (0, 2, 1)), (B, H, D, S))."""
    tr = ed.producer_op(kt, "Transpose")
    if tr is not None and tuple(tr.attrs.get("perm", ())) == (0, 1, 3, 2):
        return tr.inputs[0]
    outer = ed.producer_op(kt, "Reshape")
    tr = ed.producer_op(outer.inputs[0], "Transpose") if outer is not None else None
    inner = ed.producer_op(tr.inputs[0], "Reshape") if tr is not None else None
    if tr is None or inner is None or tuple(tr.attrs.get("perm", ())) != (0, 2, 1):
        return None
    k = inner.inputs[0]
    fk, fi, fo = facts.get(k), facts.get(inner.outputs[0]), facts.get(kt)
    if fk is None or fi is None or fo is None:
        return None
    ks, is_, os_ = fk.shape, fi.shape, fo.shape
    if ks is None or is_ is None or os_ is None:
        return None
    if len(ks) != 4 or len(is_) != 3 or len(os_) != 4:
        return None
    b, h, s, d = ks
    if is_[1:] != (s, d) or os_ != (b, h, d, s):
        return None
    return k


def _kv_heads(ed: GraphEditor, facts, kt: str, v: str) -> tuple[str, str, list[Node]] | None:
    """(k^T source, v source, new Transpose nodes): K^T as a Transpose view of K, and when
    K and V come from repeat_kv, of the un-repeated kv heads (V likewise)."""
    k = _untransposed(ed, facts, kt)
    if k is None:
        return None
    k0 = _repeat_kv_source(ed, facts, k)
    v0 = _repeat_kv_source(ed, facts, v)
    if k0 is None or v0 is None or facts[k0].shape[1] != facts[v0].shape[1]:
        k0, v0 = k, v  # no (matching) repeat_kv: still read K in place
    name = ed.fresh(f"{kt}__kv")
    node = Node("Transpose", (k0,), (name,), {"perm": (0, 1, 3, 2)}, f"{name}_transpose")
    return name, v0, [node]


def _rank4_f32(facts: dict[str, Facts], *names: str) -> bool:
    return all(is_float32(facts, n) and facts[n].rank == 4 for n in names)


def _may_equal(a: object, b: object) -> bool:
    """False only when two dims are provably different (both known integers)."""
    return a == b or not (isinstance(a, int) and isinstance(b, int))


def _keeps_shape(facts: dict[str, Facts], q: str, v: str, scores: str, mask: str, y: str) -> bool:
    """Whether the kernel's output (B, H, T, Dv) of Q's (B, H, T) may be the graph's.

    Rejects only what the shape facts prove wrong (a mask or K / V broadcasting the
    scores to more batches or heads). Exports with past-KV or computed masks leave dims
    as unknown symbols (Slice / Concat of runtime lengths); those fuse, and
    FusedAttention checks the concrete shapes at run time (falls back to the graph's
    broadcasting), so an unprovable dim never changes a result."""
    fq, fv, fs, fy = (facts.get(n, Facts()).shape for n in (q, v, scores, y))
    if fq is None or fv is None or fs is None or fy is None or len(fy) != 4:
        return False
    if not all(_may_equal(a, b) for a, b in zip(fy, (*fq[:3], fv[3]), strict=True)):
        return False
    fm = facts.get(mask, Facts()).shape if mask else ()
    if fm is None or len(fm) > len(fs):
        return False
    return all(m == 1 or _may_equal(m, d) for m, d in zip(fm, fs[len(fs) - len(fm) :], strict=True))


def fuse_attention(g: Graph) -> Graph:
    """`g` with attention blocks as FusedAttention nodes (`g` if none)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for sm in ed.nodes:
        if sm.op_type != "Softmax" or sm.domain:
            continue
        rank = facts.get(sm.inputs[0], Facts()).rank
        axis = sm.attrs.get("axis", -1 if (g.opset("") or 13) >= 13 else 1)
        if rank != 4 or axis not in (-1, 3):
            continue
        nodes: list[Node] = [sm]
        p, nan_to_zero = sm.outputs[0], 0
        users = ed.consumers(p)
        isnan = next((u for u in users if u.op_type == "IsNaN" and not u.domain), None)
        if isnan is not None and len(users) == 2 and ed.n_uses(p) == 2:
            where = only_consumer(ed, isnan.outputs[0], "Where")
            if where is None or where.inputs[2] != p or ed.scalar(where.inputs[1]) != 0.0:
                continue
            nodes += [isnan, where]
            p, nan_to_zero = where.outputs[0], 1
        pv = only_consumer(ed, p, "MatMul")
        if pv is None or pv.inputs[0] != p:
            continue
        nodes.append(pv)
        s_name, mask = sm.inputs[0], ""
        add = ed.producer_op(s_name, "Add")
        if add is not None and ed.single_use(s_name):
            for cand, other in (add.inputs, add.inputs[::-1]):
                src, _, _ = _strip_scale(ed, cand)
                if ed.producer_op(src, "MatMul") is not None and ed.single_use(cand):
                    s_name, mask = cand, other
                    nodes.append(add)
                    break
        s0, c, scale_nodes = _strip_scale(ed, s_name)
        qk = ed.producer_op(s0, "MatMul")
        if qk is None or not ed.single_use(s0):
            continue
        q, a, q_nodes = qk.inputs[0], 1.0, list[Node]()  # see _strip_scale
        kt, b, k_nodes = qk.inputs[1], 1.0, list[Node]()
        v = pv.inputs[1]
        if not _rank4_f32(facts, q, kt, v) or (mask and not is_float32(facts, mask)):
            continue
        if not _keeps_shape(facts, q, v, s_name, mask, pv.outputs[0]):
            continue
        nodes += [*scale_nodes, qk, *q_nodes, *k_nodes]
        if not ed.private(nodes, pv) or not ed.claim(nodes):
            continue
        pre: list[Node] = []
        kv = _kv_heads(ed, facts, kt, v)
        if kv is not None:
            kt, v, pre = kv
        attrs = {"scale": float(np.float32(a * b * c)), "nan_to_zero": nan_to_zero}
        ins = (q, kt, v, mask) if mask else (q, kt, v)
        fused = Node("FusedAttention", ins, pv.outputs, attrs, pv.name, D)
        ed.replace(nodes, pv, [*pre, fused])
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g
