"""ORT_ENABLE_ALL layout pass: the constant weights of FusedMatMul / FusedMatMulGroup
packed once for kernels/sgemm_packed.py (as onnxruntime's MLAS packs MatMul weights at
session creation), so no call repacks them the way BLAS does.

A 2-D float32 weight W (K, N) (transB folded in) becomes its packed (ceil(N/16), K, 16)
copy and the node gets attribute packed = N. Only weights that nothing else reads are
packed, and the original is dropped, so the resident weights do not double (a tied
embedding / output projection stays with BLAS). Skipped where the AVX2 kernels are not
available.

Opt-in for now (ONNXEXEC_PACK_WEIGHTS=1): packing BERT-base's 340 MB of weights costs
~1-2 s of session creation on a loaded machine (fresh pages), which took creation
from ~1.2x to ~2.7x onnxruntime's, while the latency gain could not be measured there.
"""

from __future__ import annotations

import os

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.ir.passes._editor import GraphEditor

D = "onnxexec"
_OPS = ("FusedMatMul", "FusedMatMulGroup")


def _packable(ed: GraphEditor, n: Node) -> np.ndarray | None:
    if n.domain != D or n.op_type not in _OPS or n.attrs.get("packed", 0) or len(n.inputs) < 2:
        return None
    w = ed.const(n.inputs[1])
    if w is None or w.ndim != 2 or w.dtype != np.float32 or n.attrs.get("transB", 0) not in (0, 1):
        return None
    if (
        ed.n_uses(n.inputs[1]) != 1
        or n.inputs[1] in ed.subgraph_reads
        or n.inputs[0] == n.inputs[1]
    ):
        return None
    return w.T if n.attrs.get("transB", 0) else w


def pack_weights(g: Graph) -> Graph:
    """`g` with its FusedMatMul(Group) weights packed (`g` if none applies)."""
    if os.environ.get("ONNXEXEC_PACK_WEIGHTS", "0") != "1":
        return g  # off by default; the kernel module (numba) is then never imported
    from onnxexec.kernels import sgemm_packed

    if not sgemm_packed.AVAILABLE:
        return g
    ed = GraphEditor(g)
    for n in ed.nodes:
        w = _packable(ed, n)
        if w is None or not ed.claim([n]):
            continue
        name = ed.add_const(f"{n.inputs[1]}__packed16", sgemm_packed.pack(w))
        ed.inits.pop(n.inputs[1], None)
        attrs = dict(n.attrs, packed=int(w.shape[1]))
        if n.op_type == "FusedMatMul":
            attrs["transB"] = 0
        ins = (n.inputs[0], name, *n.inputs[2:])
        ed.replace([n], n, Node(n.op_type, ins, n.outputs, attrs, n.name, D))
    return ed.build() if ed.changed else g
