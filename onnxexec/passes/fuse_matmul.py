"""MatMul (+ Add of a bias) and Gemm -> onnxexec::FusedMatMul (float32 only).

- MatMul(A, B) -> Add(., bias): FusedMatMul(A, B, bias) when bias is a constant that
  broadcasts along the last axis only, and the MatMul result has no other reader.
- Gemm(A, B, C) with transA=0, alpha=1, and C absent or a per-column (N,) / (1, N)
  constant with beta=1 (or beta folded into the constant): FusedMatMul(A, B, C; transB).
- Any remaining float32 MatMul: FusedMatMul(A, B) (threaded kernels).

Activation fusion (fuse_activation) then folds a following Relu / Gelu / ... in.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import (
    facts_of,
    float32_operands,
    last_axis_vector,
    only_consumer,
    vector_input,
)

D = "onnxexec"


def _bias_for(ed: GraphEditor, mm: Node, add: Node, facts) -> np.ndarray | None:
    other = add.inputs[1] if add.inputs[0] == mm.outputs[0] else add.inputs[0]
    c = ed.const(other)
    w = ed.const(mm.inputs[1])
    out = facts.get(mm.outputs[0])
    if c is None or c.dtype != np.float32 or (w is not None and w.ndim < 2):
        return None
    if out is not None and out.shape:
        n, rank = out.shape[-1], len(out.shape)
    elif w is not None and w.ndim == 2 and c.ndim <= 1:
        n, rank = w.shape[1], 1  # the product's producer had no shape rule: W gives N
    else:
        return None
    if not isinstance(n, int) or c.ndim > rank:
        return None
    return last_axis_vector(c, n)


def _gemm(ed: GraphEditor, n: Node, facts) -> Node | None:
    a = n.attrs
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0:
        return None
    if not float32_operands(ed, facts, *n.inputs[:2]):
        return None
    ins = list(n.inputs[:2])
    if len(n.inputs) > 2 and n.inputs[2]:
        c = ed.const(n.inputs[2])
        out = facts.get(n.outputs[0])
        w = ed.const(n.inputs[1])
        cols = out.shape[1] if out is not None and out.shape is not None else None
        if cols is None and w is not None and w.ndim == 2:  # N from the weight
            cols = w.shape[0] if a.get("transB", 0) else w.shape[1]
        if c is None or not isinstance(cols, int):
            return None
        vec = last_axis_vector(c, cols) if c.ndim <= 2 else None
        if vec is None or vec.dtype != np.float32:
            return None
        beta = a.get("beta", 1.0)
        if beta != 1.0:
            vec = (vec * np.float32(beta)).astype(np.float32)
        ins.append(vector_input(ed, n.inputs[2], vec, "bias"))
    return Node("FusedMatMul", tuple(ins), n.outputs, {"transB": a.get("transB", 0)}, n.name, D)


def _unflatten(g: Graph) -> Graph:
    """Reshape(x, (-1, K)) -> FusedMatMul(., W) -> Reshape(., x.shape[:-1] + (N,)) becomes
    FusedMatMul(x, W): the kernel multiplies over any leading axes (GPT-2's Conv1D and
    Gemm exports flatten and restore the batch / sequence axes around every product,
    with a Shape/Gather/Concat chain per product computing the restored shape)."""
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain != D or n.op_type != "FusedMatMul" or n.attrs.get("transB", 0) not in (0, 1):
            continue
        w = ed.const(n.inputs[1])
        flat = ed.producer_op(n.inputs[0], "Reshape")
        back = only_consumer(ed, n.outputs[0], "Reshape")
        if w is None or w.ndim != 2 or flat is None or back is None:
            continue
        if not ed.single_use(n.inputs[0]):
            continue
        x = flat.inputs[0]
        fx, fo = facts.get(x), facts.get(back.outputs[0])
        fa = facts.get(n.inputs[0])
        if fx is None or fo is None or fa is None:
            continue
        xs, os_, as_ = fx.shape, fo.shape, fa.shape
        if xs is None or os_ is None or as_ is None:
            continue
        k = w.shape[0] if not n.attrs.get("transB", 0) else w.shape[1]
        n_out = w.shape[1] if not n.attrs.get("transB", 0) else w.shape[0]
        if len(xs) < 2 or xs[-1] != k or len(as_) != 2 or as_[1] != k:
            continue
        if os_ != (*xs[:-1], n_out) or not ed.claim([flat, n, back]):
            continue
        ed.replace(
            [flat, n, back],
            back,
            Node("FusedMatMul", (x, *n.inputs[1:]), back.outputs, n.attrs, n.name, D),
        )
    return ed.build() if ed.changed else g


def fuse_matmul(g: Graph) -> Graph:
    """`g` with MatMul/Gemm (+ bias Add) as FusedMatMul nodes (`g` if none applies)."""
    return _unflatten(_fuse_matmul(g))


def _fuse_matmul(g: Graph) -> Graph:
    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain or n.op_type not in ("MatMul", "Gemm") or not ed.claim([n]):
            continue
        if n.op_type == "Gemm":
            new = _gemm(ed, n, facts)
            if new is not None:
                ed.replace([n], n, new)
            continue
        if not float32_operands(ed, facts, n.inputs[0], n.inputs[1]):
            continue
        add = only_consumer(ed, n.outputs[0], "Add")
        bias = _bias_for(ed, n, add, facts) if add is not None else None
        if add is not None and bias is not None and ed.claim([add]):
            other = add.inputs[1] if add.inputs[0] == n.outputs[0] else add.inputs[0]
            name = vector_input(ed, other, bias, "bias")
            ed.replace(
                [n, add],
                add,
                Node("FusedMatMul", (*n.inputs, name), add.outputs, {}, add.name or n.name, D),
            )
        else:
            ed.replace([n], n, Node("FusedMatMul", n.inputs, n.outputs, {}, n.name, D))
    if ed.changed:
        ed.use_domain(D)
    return ed.build() if ed.changed else g
