"""ORT_ENABLE_ALL layout pass: the constant weights of FusedMatMul / FusedMatMulGroup
packed once for kernels/sgemm_packed.py (as onnxruntime's MLAS packs MatMul weights at
session creation), so no call repacks them the way BLAS does.

A 2-D float32 weight W (K, N) (transB folded in) becomes its packed (ceil(N/NR), K, NR)
copy (NR = 32 on AVX-512 hosts, 16 on AVX2) and the node gets attribute packed = N.
Only weights that nothing else reads are packed, and the original is dropped, so the
resident weights do not double (a tied embedding / output projection stays with BLAS);
weights under _MIN_SIZE values stay with BLAS too (packing gains nothing there, and a
small model then need not import numba).

On by default where the AVX-512 tiles run: at transformer shapes they reach 1.2-1.5x
the throughput of OpenBLAS's sgemm on the same threads (benchmarks/
bench_sgemm_packed.py), and packing BERT-base's 340 MB costs ~50-70 ms of a ~1.7 s
session creation. ONNXEXEC_PACK_WEIGHTS=1 / 0 forces it on / off (on AVX2 hosts it
stays opt-in: the 16-wide kernels were not measured faster than BLAS there).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.ir.passes._editor import GraphEditor

D = "onnxexec"
_OPS = ("FusedMatMul", "FusedMatMulGroup")
_MIN_SIZE = 1 << 16  # K * N below which a weight stays unpacked


def _packable(ed: GraphEditor, n: Node) -> np.ndarray | None:
    if n.domain != D or n.op_type not in _OPS or n.attrs.get("packed", 0) or len(n.inputs) < 2:
        return None
    w = ed.const(n.inputs[1])
    if w is None or w.ndim != 2 or w.dtype != np.float32 or n.attrs.get("transB", 0) not in (0, 1):
        return None
    if w.size < _MIN_SIZE:
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
    force = os.environ.get("ONNXEXEC_PACK_WEIGHTS", "")
    if force == "0":
        return g
    ed = GraphEditor(g)
    todo = [(n, w) for n in ed.nodes if (w := _packable(ed, n)) is not None]
    if not todo:
        return g  # the kernel module (numba) is then never imported
    from onnxexec.kernels import sgemm_packed

    if not sgemm_packed.AVAILABLE or not (sgemm_packed.AVX512 or force == "1"):
        return g
    todo = [(n, w) for n, w in todo if ed.claim([n])]
    # Two threads (numpy's copy releases the GIL): most of the cost is the first touch
    # of the packed copies' fresh pages, which ran 0.4 GB/s on one thread of this VM
    # and twice that on two.
    with ThreadPoolExecutor(min(2, os.cpu_count() or 1)) as ex:
        packed = list(ex.map(sgemm_packed.pack, [w for _, w in todo]))
    for (n, w), wp in zip(todo, packed, strict=True):
        name = ed.add_const(f"{n.inputs[1]}__packed{sgemm_packed.NR}", wp)
        ed.inits.pop(n.inputs[1], None)
        attrs = dict(n.attrs, packed=int(w.shape[1]))
        if n.op_type == "FusedMatMul":
            attrs["transB"] = 0
        ins = (n.inputs[0], name, *n.inputs[2:])
        ed.replace([n], n, Node(n.op_type, ins, n.outputs, attrs, n.name, D))
    return ed.build() if ed.changed else g
