"""onnxruntime's dynamic-quantization pattern -> com.microsoft MatMulIntegerToFloat, as
its MatMulIntegerToFloatFusion does (onnxruntime/core/optimizer/
matmul_integer_to_float.cc, level 2):

    MatMulInteger(a, W, a_zp, W_zp) -> Cast(to=float) -> Mul(., Mul(a_scale, W_scale))
        [-> Add(., bias)]
    =>  MatMulIntegerToFloat(a, W, a_scale, W_scale, a_zp, W_zp[, bias])

W, W_zp and W_scale are constants (W_scale per tensor or per column), a_scale is a
per-tensor value (DynamicQuantizeLinear's scale output), the bias a constant
per-column vector. The integer product never leaves the fused kernel.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import only_consumer

MS = "com.microsoft"


def _scales(ed: GraphEditor, mul: Node, cast_out: str) -> tuple[str, str] | None:
    """(a_scale, W_scale) of the Mul(cast, Mul(a_scale, W_scale)) after the Cast."""
    other = mul.inputs[1] if mul.inputs[0] == cast_out else mul.inputs[0]
    sm = ed.producer_op(other, "Mul")
    if sm is None or not ed.single_use(other):
        return None
    for a_s, w_s in (sm.inputs, sm.inputs[::-1]):
        w = ed.const(w_s)
        if w is not None and w.dtype == np.float32 and w.ndim <= 1 and ed.const(a_s) is None:
            return a_s, w_s
    return None


def _bias(ed: GraphEditor, mul: Node, n_cols: int) -> tuple[Node, str] | None:
    add = only_consumer(ed, mul.outputs[0], "Add")
    if add is None:
        return None
    other = add.inputs[1] if add.inputs[0] == mul.outputs[0] else add.inputs[0]
    b = ed.const(other)
    if b is None or b.dtype != np.float32 or b.shape != (n_cols,):
        return None
    return add, other


def fuse_dynamic_quant(g: Graph) -> Graph:
    """`g` with MatMulInteger -> Cast -> Mul chains as MatMulIntegerToFloat."""
    if not any(n.op_type == "MatMulInteger" for n in g.nodes):
        return g
    ed = GraphEditor(g)
    for n in ed.nodes:
        if n.domain or n.op_type != "MatMulInteger" or len(n.inputs) != 4:
            continue
        w, zw = ed.const(n.inputs[1]), ed.const(n.inputs[3])
        if w is None or w.ndim != 2 or zw is None or zw.size not in (1, w.shape[1]):
            continue
        cast = only_consumer(ed, n.outputs[0], "Cast")
        if cast is None or cast.attrs.get("to") != 1:
            continue
        mul = only_consumer(ed, cast.outputs[0], "Mul")
        if mul is None:
            continue
        scales = _scales(ed, mul, cast.outputs[0])
        w_scale = None if scales is None else ed.const(scales[1])
        if scales is None or w_scale is None or w_scale.size not in (1, w.shape[1]):
            continue
        sm = ed.producer_op(
            mul.inputs[1] if mul.inputs[0] == cast.outputs[0] else mul.inputs[0], "Mul"
        )
        if sm is None:
            continue
        bias = _bias(ed, mul, w.shape[1])
        pattern = [n, cast, sm, mul] + ([bias[0]] if bias else [])
        last = bias[0] if bias else mul
        if not ed.private(pattern, last) or not ed.claim(pattern):
            continue
        ins: tuple[str, ...] = (n.inputs[0], n.inputs[1], *scales, n.inputs[2], n.inputs[3])
        if bias:
            ins = (*ins, bias[1])
        ed.use_domain(MS, 1)
        ed.replace(pattern, last, Node("MatMulIntegerToFloat", ins, last.outputs, {}, n.name, MS))
    return ed.build() if ed.changed else g
