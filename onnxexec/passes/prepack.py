"""ORT_ENABLE_ALL layout pass: constant weights of the fused products stored once in a
layout BLAS reads in place, so no call copies them.

numpy hands a matrix to sgemm without copying only when it is aligned and C- or
F-contiguous (a transposed view is fine: it is F-contiguous). Weights produced by
constant folding (a Slice or a Transpose of a 3-D tensor, say) can be strided views;
each run would then copy them inside np.matmul. Those get materialized here, once.
Contiguous weights are left alone: OpenBLAS runs NN and NT products at the same speed
here, so transposing copies would only double the resident weights.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor

D = "onnxexec"
_WEIGHT_INPUT = {
    ("onnxexec", "FusedMatMul"): 1,
    ("onnxexec", "FusedConv"): 1,
    ("", "MatMul"): 1,
    ("", "Gemm"): 1,
    ("", "Conv"): 1,
}


def blas_ready(w: np.ndarray) -> bool:
    """Whether sgemm can read `w` (or its last-two-axes transpose) without a copy."""
    return w.flags.aligned and (w.flags.c_contiguous or w.flags.f_contiguous)


def prepack(g: Graph) -> Graph:
    """`g` with every strided constant weight replaced by a contiguous copy."""
    ed = GraphEditor(g)
    done: dict[str, str] = {}
    for n in ed.nodes:
        k = _WEIGHT_INPUT.get((n.domain, n.op_type))
        if k is None or len(n.inputs) <= k:
            continue
        name = n.inputs[k]
        w = ed.const(name)
        if w is None or w.dtype.kind != "f" or blas_ready(w):
            continue
        if name not in done:
            done[name] = ed.add_const(f"{name}__packed", np.ascontiguousarray(w))
        ins = tuple(done[name] if i == k else x for i, x in enumerate(n.inputs))
        ed.replace([n], n, Node(n.op_type, ins, n.outputs, n.attrs, n.name, n.domain))
    return ed.build() if ed.changed else g
