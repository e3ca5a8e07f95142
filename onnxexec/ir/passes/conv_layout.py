"""ORT_ENABLE_ALL layout pass: constant KxK conv weights stored "OHWI" for the
tap-GEMM conv kernel (kernels/conv_taps.py).

The weight keeps its name, shape (M, Cg, KH, KW) and values: only its memory order
changes (an (M, KH, KW, Cg) C-contiguous array seen through a transposed view), so
every reader still sees the same tensor and the saved model is unchanged. The kernel
then reads each tap's (M, Cg) matrix in place. A weight is re-stored only when every
node reading it is a float32 FusedConv whose output width is known and for which the
kernel picks the tap path (`use_taps`); anything else would pay a copy per call.
Runs after prepack, which would otherwise turn the view back into OIHW.
"""

from __future__ import annotations

from onnxexec.ir.graph import Graph, Node
from onnxexec.ir.passes._editor import GraphEditor
from onnxexec.ir.passes._patterns import facts_of

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
    ow = f.shape[3]
    from onnxexec.kernels.conv_taps import use_taps

    return isinstance(ow, int) and use_taps(w.shape[1], ow, w.shape[2], w.shape[3])


def conv_layout(g: Graph) -> Graph:
    """`g` with the weights of tap-path FusedConvs stored OHWI (same name and values)."""
    if not any(n.domain == D and n.op_type == "FusedConv" for n in g.nodes):
        return g  # and the conv kernels (numba) stay unimported
    from onnxexec.kernels.conv_taps import ohwi, to_ohwi

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
