"""Conv -> BatchNormalization (inference) folded into the Conv's weights and bias.

BN(y) = (y - mean) * s + b with s = scale / sqrt(var + eps) per output channel, so
Conv(X, W, B) followed by BN is Conv(X, W * s, (B - mean) * s + b). Computed in the
weights' dtype, as onnxruntime's ConvBNFusion does. Only when every BN parameter and
W (and B) are constants, BN's extra (training) outputs are unused, and nothing else
reads the Conv output.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes._patterns import only_consumer


def fold_batchnorm(g: Graph) -> Graph:
    """`g` with Conv+BatchNormalization pairs folded (`g` if there are none)."""
    ed = GraphEditor(g)
    for conv in ed.nodes:
        if conv.op_type != "Conv" or conv.domain:
            continue
        bn = only_consumer(ed, conv.outputs[0], "BatchNormalization")
        if bn is None or len(bn.inputs) != 5 or any(ed.n_uses(o) for o in bn.outputs[1:] if o):
            continue
        if bn.attrs.get("training_mode", 0) or bn.attrs.get("spatial", 1) != 1:
            continue
        w = ed.const(conv.inputs[1])
        found = [ed.const(i) for i in bn.inputs[1:]]
        params = [p for p in found if p is not None]
        b = ed.const(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        has_b = len(conv.inputs) > 2 and bool(conv.inputs[2])
        if w is None or len(params) != len(found) or (has_b and b is None):
            continue
        if w.dtype.kind != "f" or any(p.dtype != w.dtype for p in params):
            continue
        scale, beta, mean, var = (p.reshape(-1) for p in params)
        m = w.shape[0]
        if any(p.size != m for p in (scale, beta, mean, var)) or not ed.claim([conv, bn]):
            continue
        eps = w.dtype.type(bn.attrs.get("epsilon", 1e-5))
        s = scale / np.sqrt(var + eps)
        w2 = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = b.reshape(-1) if b is not None else np.zeros(m, dtype=w.dtype)
        b2 = ((b0 - mean) * s + beta).astype(w.dtype)
        wn = ed.add_const(f"{conv.inputs[1]}__bn", w2)
        bname = ed.add_const(f"{bn.outputs[0]}__bias", b2)
        ed.replace(
            [conv, bn],
            bn,
            Node("Conv", (conv.inputs[0], wn, bname), bn.outputs[:1], conv.attrs, conv.name),
        )
    return ed.build() if ed.changed else g
