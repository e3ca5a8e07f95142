"""ORT_ENABLE_ALL layout pass: constant KxK conv weights stored "OHWI" for the
direct, tap-GEMM and im2row conv kernels (kernels/conv/conv_direct.py,
kernels/conv/conv_taps.py, kernels/conv/conv_rows.py).

The weight keeps its name, shape (M, Cg, KH, KW) and values: only its memory order
changes (an (M, KH, KW, Cg) C-contiguous array seen through a transposed view), so
every reader still sees the same tensor and the saved model is unchanged. The kernels
then read each tap's (M, Cg) matrix, or the whole (M, KH*KW*Cg) matrix, in place. A
weight is re-stored only when every node reading it is a float32 FusedConv whose
output shape is known and for which the kernel picks one of those paths (`use_direct`,
`use_taps`, `use_rows`); anything else would pay a copy per call.
Runs after prepack, which would otherwise turn the view back into OIHW.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import facts_of

D = "onnxexec"


def _wants_taps(n: Node, facts: dict, ed: GraphEditor) -> bool:
    if n.domain != D or n.op_type != "FusedConv" or len(n.inputs) < 2:
        return False
    w = ed.const(n.inputs[1])
    if w is None or w.ndim != 4 or w.dtype.name != "float32":
        return False
    f = facts.get(n.outputs[0])
    x = facts.get(n.inputs[0])
    if f is None or f.shape is None or len(f.shape) != 4 or x is None or x.elem != f.elem:
        return False
    m, cg, kh, kw = w.shape
    oh, ow = f.shape[2], f.shape[3]
    group = n.attrs.get("group", 1)
    if not isinstance(ow, int) or not isinstance(group, int) or group < 1:
        return False
    from onnxexec.kernels.conv.conv_direct import use_direct
    from onnxexec.kernels.conv.conv_rows import use_rows
    from onnxexec.kernels.conv.conv_taps import use_taps

    rows = isinstance(oh, int) and use_rows(cg, m // group, oh * ow, kh, kw)
    if rows or use_taps(cg, ow, kh, kw):
        return True
    ih, iw = x.shape[2:] if x.shape is not None and len(x.shape) == 4 else (None, None)
    strides = n.attrs.get("strides") or (1, 1)
    if not (isinstance(ih, int) and isinstance(iw, int)) or len(strides) != 2:
        return False
    if not all(isinstance(v, int) for v in strides):
        return False
    return use_direct(cg, kh, kw, strides[0], strides[1], ih, iw)


def conv_layout(g: Graph) -> Graph:
    """`g` with the weights of tap-path FusedConvs stored OHWI (same name and values)."""
    if not any(n.domain == D and n.op_type == "FusedConv" for n in g.nodes):
        return g  # and the conv kernels (numba) stay unimported
    from onnxexec.kernels.conv.conv_taps import ohwi, to_ohwi

    facts = facts_of(g)
    ed = GraphEditor(g)
    for n in ed.nodes:
        if not _wants_taps(n, facts, ed):
            continue
        name = n.inputs[1]
        w = ed.const(name)
        if w is None or ohwi(w):
            continue
        if all(_wants_taps(u, facts, ed) and u.inputs[1] == name for u in ed.consumers(name)):
            ed.inits[name] = to_ohwi(w)
            ed.changed = True
    return ed.build() if ed.changed else g
