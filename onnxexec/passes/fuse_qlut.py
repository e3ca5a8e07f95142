"""DequantizeLinear -> per-channel float ops -> QuantizeLinear => one ChannelLut.

A chain of elementwise ops whose parameters are constant and at most per channel
(axis 1) maps each 8-bit code of each channel to one output code, so the whole chain
is a (C, 256) table: computed here by running the chain's own handlers on every code
of every channel (exact with respect to running the chain unfused), applied by
ops/fused_qlut.py. Quantized models keep BatchNormalization between a DQ and a Q
when the quantizer did not fold it into the conv (onnxruntime's QDQ quantizer on an
unfolded export); onnxruntime runs those in float.

Chain ops: BatchNormalization (inference form), Relu, LeakyRelu, Clip (constant
bounds), Sigmoid, Tanh, and Add / Sub / Mul / Div whose other operand is a constant
of one element (ndim <= 1); a parameter may also be DequantizeLinear(constants).
The DQ and the Q must be per tensor with constant parameters; every intermediate
value must have the chain as its only reader.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor
from onnxexec.passes.fold_constants import run_node

D = "onnxexec"
_QDOMAINS = ("", "com.microsoft")
_BYTE = (np.dtype(np.uint8), np.dtype(np.int8))
_UNARY = frozenset({"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip"})
_BINARY = frozenset({"Add", "Sub", "Mul", "Div"})
_MAX_CHANNELS = 1 << 14  # table bytes per channel: 256


def _qparams_ok(ed: GraphEditor, n: Node) -> bool:
    if n.domain not in _QDOMAINS or len(n.inputs) < 3 or not n.inputs[2]:
        return False
    if n.attrs.get("block_size", 0) or n.attrs.get("saturate", 1) != 1:
        return False
    s, z = ed.const(n.inputs[1]), ed.const(n.inputs[2])
    return s is not None and z is not None and s.size == 1 and z.dtype in _BYTE


def _param(ed: GraphEditor, g: Graph, name: str) -> tuple[np.ndarray | None, Node | None]:
    """(value, its DequantizeLinear) of a constant or of DQ(constants): QDQ models keep
    BatchNormalization's scale and bias quantized."""
    v = ed.const(name)
    if v is not None:
        return v, None
    n = ed.node_of(name)
    if n is None or n.op_type != "DequantizeLinear" or n.domain not in _QDOMAINS:
        return None, None
    args = [ed.const(i) if i else None for i in n.inputs]
    if any(i and a is None for i, a in zip(n.inputs, args, strict=True)):
        return None, None
    outs = run_node(n, g, args)
    return (outs[0], n) if outs is not None else (None, None)


def _step(ed: GraphEditor, g: Graph, n: Node, dqs: list[Node]) -> int | None:
    """Channels n's constants carry (1: per tensor) when n is a chain op, else None;
    the DequantizeLinear nodes producing them go to `dqs`."""
    if n.domain or len(n.outputs) != 1:
        return None
    found = [_param(ed, g, i) if i else (None, None) for i in n.inputs[1:]]
    consts = [v for v, _ in found]
    dqs += [d for _, d in found if d is not None]
    if any(i and c is None for i, c in zip(n.inputs[1:], consts, strict=True)):
        return None
    if n.op_type in _UNARY:
        return 1 if all(c is None or c.size == 1 for c in consts) else None
    if n.op_type in _BINARY:
        c = consts[0] if consts else None
        return 1 if c is not None and c.size == 1 and c.ndim <= 1 else None
    if n.op_type == "BatchNormalization" and n.attrs.get("training_mode", 0) == 0:
        sizes = {c.size for c in consts if c is not None}
        ok = len(consts) == 4 and all(c is not None and c.ndim == 1 for c in consts)
        return sizes.pop() if ok and len(sizes) == 1 else None
    return None


def _fuse_chain(ed: GraphEditor, g: Graph, dq: Node) -> None:
    if dq.op_type != "DequantizeLinear" or not _qparams_ok(ed, dq):
        return
    chain: list[Node] = []
    params: list[Node] = []  # DQ(constant) parameters of the chain
    channels = 1
    cur = dq
    while True:
        users = ed.consumers(cur.outputs[0])
        if len(users) != 1 or not ed.single_use(cur.outputs[0]):
            return
        nxt = users[0]
        if nxt.inputs[0] != cur.outputs[0]:
            return
        if nxt.op_type == "QuantizeLinear":
            break
        c = _step(ed, g, nxt, params)
        if c is None or (c > 1 and channels > 1 and c != channels):
            return
        channels = max(channels, c)
        chain.append(nxt)
        cur = nxt
    q = nxt
    if not chain or not _qparams_ok(ed, q) or channels > _MAX_CHANNELS:
        return
    table = _table(ed, g, dq, chain, q, channels)
    pattern = [dq, *chain, q]
    seen = {id(n) for n in pattern}
    for p in params:  # a parameter DQ read only here goes with the chain
        if id(p) not in seen and ed.single_use(p.outputs[0]):
            seen.add(id(p))
            pattern.append(p)
    if table is None or not ed.claim(pattern):
        return
    name = ed.add_const(f"{q.outputs[0]}_lut", table)
    ed.use_domain(D, 1)
    lut = Node("ChannelLut", (dq.inputs[0], name), q.outputs, {}, q.name or dq.name, D)
    ed.replace(pattern, q, lut)


def _table(
    ed: GraphEditor, g: Graph, dq: Node, chain: list[Node], q: Node, channels: int
) -> np.ndarray | None:
    """Every code (rows by byte value) of every channel through dq, chain and q, as
    an x of shape (1, C, 1, 256): rank 4, the layout the chain runs on in a conv net."""
    xt = ed.const(dq.inputs[2]).dtype  # type: ignore[union-attr]
    codes = np.arange(256, dtype=np.uint8).view(xt)
    x = np.ascontiguousarray(np.broadcast_to(codes, (1, channels, 1, 256)))
    val = x
    for n in [dq, *chain, q]:
        args = [val, *(_param(ed, g, i)[0] if i else None for i in n.inputs[1:])]
        outs = run_node(n, g, args)
        if outs is None or outs[0].shape != x.shape:
            return None
        val = outs[0]
    if val.dtype not in _BYTE:
        return None
    return np.ascontiguousarray(val.reshape(channels, 256))


def fuse_qlut(g: Graph) -> Graph:
    """`g` with DQ -> per-channel op chain -> Q groups as ChannelLut nodes."""
    if not any(n.op_type == "DequantizeLinear" for n in g.nodes):
        return g
    ed = GraphEditor(g)
    for n in list(ed.nodes):
        _fuse_chain(ed, g, n)
    return ed.build() if ed.changed else g
