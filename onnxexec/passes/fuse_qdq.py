"""QDQ groups -> integer ops, as onnxruntime's QDQ selector/action transformers do
(onnxruntime/core/optimizer/qdq_transformer/selectors_actions, level 2).

- DQ(x) + DQ(w) -> Conv [+ DQ(int32 bias)] -> Q(y)  =>  QLinearConv
- DQ(a) + DQ(b) -> MatMul -> Q(y)                   =>  QLinearMatMul
- DQ(a) + DQ(b) -> MatMul (float output)            =>  com.microsoft MatMulIntegerToFloat
- DQ(a) + DQ(b) -> Gemm [+ DQ(int32 C)] [-> Q(y)]   =>  com.microsoft QGemm
- DQ(inputs) -> Add / Mul / Sigmoid / LeakyRelu / Softmax / AveragePool /
  GlobalAveragePool / Concat -> Q(y)                 =>  com.microsoft QLinear<op>

The weight (second operand) must be a constant 8-bit tensor whose DequantizeLinear is
per tensor or per output channel (Conv axis 0, MatMul axis 1, Gemm the N axis); every
scale and zero point must be constant and per tensor elsewhere. A bias is taken only
when it is DQ(int32 constant) with zero point 0, as the QDQ quantizer emits it. The
DequantizeLinear of x stays when something else reads it.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor

MS = "com.microsoft"
_QDOMAINS = ("", MS)
_BYTE = (np.dtype(np.uint8), np.dtype(np.int8))


def _c(ed: GraphEditor, name: str) -> np.ndarray:
    """A constant the matcher already found (checked by _dq / _q)."""
    v = ed.const(name)
    assert v is not None
    return v


def _dq(ed: GraphEditor, name: str) -> Node | None:
    """The DequantizeLinear producing `name` with constant, per-tensor-or-axis params."""
    n = ed.node_of(name)
    if n is None or n.op_type != "DequantizeLinear" or n.domain not in _QDOMAINS:
        return None
    if n.attrs.get("block_size", 0) or len(n.inputs) < 3 or not n.inputs[2]:
        return None  # the zero point fixes the integer type; absent -> leave it
    s, z = ed.const(n.inputs[1]), ed.const(n.inputs[2])
    if s is None or z is None or s.dtype != np.float32 or s.shape != z.shape or s.ndim > 1:
        return None
    return n


def _per_tensor(ed: GraphEditor, n: Node) -> bool:
    return _c(ed, n.inputs[1]).size == 1 and n.inputs[2] is not None


def _weight_ok(ed: GraphEditor, n: Node, axis: int) -> bool:
    """A constant 8-bit weight, per tensor or per channel along `axis` of it."""
    w = ed.const(n.inputs[0])
    if w is None or w.dtype not in _BYTE:
        return False
    s = _c(ed, n.inputs[1])
    if s.size == 1:
        return True
    ax = n.attrs.get("axis", 1)
    return ax % w.ndim == axis % w.ndim and s.size == w.shape[axis]


def _q(ed: GraphEditor, name: str) -> Node | None:
    """The only reader of `name` when it is a per-tensor 8-bit QuantizeLinear."""
    users = ed.consumers(name)
    if len(users) != 1 or ed.n_uses(name) != 1:
        return None
    q = users[0]
    if q.op_type != "QuantizeLinear" or q.domain not in _QDOMAINS or len(q.inputs) < 3:
        return None
    s, z = ed.const(q.inputs[1]), ed.const(q.inputs[2]) if q.inputs[2] else None
    if s is None or z is None or s.size != 1 or z.dtype not in _BYTE:
        return None
    return q


def _bias(ed: GraphEditor, name: str, scale: np.ndarray) -> tuple[Node, str] | None:
    """DQ(int32 constant, scale = x_scale * w_scale, zero point 0): (node, int32 name)."""
    n = ed.node_of(name)
    if n is None or n.op_type != "DequantizeLinear" or n.domain not in _QDOMAINS:
        return None
    b = ed.const(n.inputs[0])
    s = ed.const(n.inputs[1])
    z = ed.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    if b is None or b.dtype != np.int32 or s is None or (z is not None and np.any(z != 0)):
        return None
    want = np.broadcast_to(scale, b.shape) if scale.size > 1 else scale.reshape(())
    if not np.allclose(np.broadcast_to(s, b.shape), want, rtol=1e-6, atol=0):
        return None
    return n, n.inputs[0]


def _private_dq(ed: GraphEditor, dq: Node) -> list[Node]:
    """[dq] when the fused node is its only reader (it can go), else []."""
    return [dq] if ed.single_use(dq.outputs[0]) else []


def _fuse_one(ed: GraphEditor, n: Node) -> None:
    if n.domain or n.op_type not in ("Conv", "MatMul", "Gemm") or len(n.inputs) < 2:
        return
    dx, dw = _dq(ed, n.inputs[0]), _dq(ed, n.inputs[1])
    if dx is None or dw is None or not _per_tensor(ed, dx):
        return
    trans_b = n.attrs.get("transB", 0)
    if n.op_type == "Gemm":
        a = n.attrs
        if a.get("transA", 0) or a.get("beta", 1.0) != 1.0 or a.get("alpha", 1.0) != 1.0:
            return
    w_axis = {"Conv": 0, "MatMul": 1, "Gemm": 0 if trans_b else 1}[n.op_type]
    if not _weight_ok(ed, dw, w_axis):
        return
    if n.op_type == "MatMul" and _c(ed, dw.inputs[0]).ndim != 2:
        return
    bias = None
    if len(n.inputs) > 2 and n.inputs[2]:
        scale = _c(ed, dx.inputs[1]).reshape(()) * _c(ed, dw.inputs[1])
        bias = _bias(ed, n.inputs[2], scale.astype(np.float32))
        if bias is None:
            return
    q = _q(ed, n.outputs[0])
    if n.op_type == "MatMul" and q is None:
        new = Node(
            "MatMulIntegerToFloat",
            (dx.inputs[0], dw.inputs[0], dx.inputs[1], dw.inputs[1], dx.inputs[2], dw.inputs[2]),
            n.outputs, {}, n.name, MS,
        )  # fmt: skip
    elif n.op_type == "Gemm":
        ins = [dx.inputs[0], dx.inputs[1], dx.inputs[2], *dw.inputs[:3]]
        ins.append(bias[1] if bias else "")
        if q is not None:
            ins += [q.inputs[1], q.inputs[2]]
        attrs = {"transB": trans_b}
        new = Node("QGemm", tuple(ins), (q or n).outputs, attrs, n.name, MS)
    elif q is None:
        return  # Conv with a float output: onnxruntime keeps it float too
    else:
        op = "QLinearConv" if n.op_type == "Conv" else "QLinearMatMul"
        ins = [*dx.inputs[:3], *dw.inputs[:3], q.inputs[1], q.inputs[2]]
        if bias:
            ins.append(bias[1])
        attrs = dict(n.attrs) if n.op_type == "Conv" else {}
        new = Node(op, tuple(ins), q.outputs, attrs, n.name, "")
    pattern = [n, *([q] if q is not None else []), *_private_dq(ed, dw)]
    pattern += _private_dq(ed, dx)
    if bias:
        pattern += _private_dq(ed, bias[0])
    if not ed.claim(pattern):
        return
    if new.domain == MS:
        ed.use_domain(MS, 1)
    ed.replace(pattern, q or n, new)


# op -> (contrib op, attributes carried over); onnxruntime's Unary / Binary / Variadic
# QDQ selectors. Softmax also takes the model's opset (its `opset` attribute).
_ELEMENTWISE = {
    "Add": ("QLinearAdd", ()),
    "Mul": ("QLinearMul", ()),
    "Sigmoid": ("QLinearSigmoid", ()),
    "LeakyRelu": ("QLinearLeakyRelu", ("alpha",)),
    "Softmax": ("QLinearSoftmax", ("axis",)),
    "GlobalAveragePool": ("QLinearGlobalAveragePool", ()),
    "AveragePool": (
        "QLinearAveragePool",
        ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"),
    ),
    "Concat": ("QLinearConcat", ("axis",)),
}


def _fuse_elementwise(ed: GraphEditor, n: Node, opset: int) -> None:
    """DQ(each input) -> op -> Q  =>  its com.microsoft QLinear op, all per tensor and of
    one 8-bit type (the input and output types must agree)."""
    if n.domain or n.op_type not in _ELEMENTWISE or not n.inputs:
        return
    if n.op_type == "AveragePool" and any(d != 1 for d in n.attrs.get("dilations", ()) or ()):
        return
    found = [_dq(ed, i) for i in n.inputs]
    q = _q(ed, n.outputs[0])
    dqs = [d for d in found if d is not None and _per_tensor(ed, d)]
    if q is None or len(dqs) != len(found):
        return
    out_t = _c(ed, q.inputs[2]).dtype
    if any(_c(ed, d.inputs[2]).dtype != out_t for d in dqs):
        return
    op, keep = _ELEMENTWISE[n.op_type]
    attrs = {k: n.attrs[k] for k in keep if k in n.attrs}
    if n.op_type == "Softmax":
        attrs["opset"] = opset
        attrs.setdefault("axis", -1 if opset >= 13 else 1)
    if n.op_type == "Concat":
        ins = [q.inputs[1], q.inputs[2]]
        for d in dqs:
            ins += list(d.inputs[:3])
    else:
        ins = [x for d in dqs for x in d.inputs[:3]] + [q.inputs[1], q.inputs[2]]
    pattern = [n, q]
    for name in dict.fromkeys(n.inputs):  # x + x reads one DQ twice
        producer = ed.node_of(name)
        if producer is not None and ed.n_uses(name) == sum(i == name for i in n.inputs):
            pattern.append(producer)
    if not ed.claim(pattern):
        return
    ed.use_domain(MS, 1)
    ed.replace(pattern, q, Node(op, tuple(ins), q.outputs, attrs, n.name, MS))


def fuse_qdq(g: Graph) -> Graph:
    """`g` with QDQ Conv / MatMul / Gemm groups as integer ops (`g` if none applies)."""
    if not any(n.op_type == "DequantizeLinear" for n in g.nodes):
        return g
    ed = GraphEditor(g)
    opset = g.opset_imports.get("", 1)
    for n in list(ed.nodes):
        _fuse_one(ed, n)
        _fuse_elementwise(ed, n, opset)
    return ed.build() if ed.changed else g
