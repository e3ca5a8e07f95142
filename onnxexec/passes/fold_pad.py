"""Pad -> Conv / AveragePool / MaxPool: an explicit constant-mode Pad of the spatial axes
folded into the window op's own `pads` attribute (as onnxruntime's PadFusion does).

TensorFlow-style "SAME" padding is exported as a separate Pad before each conv
(transformers' MobileNetV2, tf2onnx graphs); unfolded, every such conv first copies its
whole input into a padded buffer, and the conv kernels' fused paths never see it.

Exact when (Operators.md, Pad / Conv / AveragePool / MaxPool):
- the pads are constants, >= 0, zero on the batch and channel axes;
- the pad value is 0 for Conv and AveragePool (whose `count_include_pad=1` then counts
  the padded zeros, as the explicit Pad made them real inputs; so the pool must count
  its own pads too, or have none), and -inf for MaxPool (whose own padding is ignored,
  i.e. -inf);
- the window op has auto_pad NOTSET / VALID and, for pools, ceil_mode 0 (ceil mode drops
  a last window that starts in the end padding; in real data it would stay) and one
  output (MaxPool's Indices count positions of the padded tensor).
Every reader of the Pad's output must take it; then the Pad goes.
"""

from __future__ import annotations

import math

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor

_WINDOW = {("", "Conv"), ("", "AveragePool"), ("", "MaxPool"), ("onnxexec", "FusedConv")}


def _pads_and_value(ed: GraphEditor, pad: Node, rank: int) -> tuple[list[int], float] | None:
    """(full-rank pads, begin then end, pad value) of a constant-mode Pad, else None."""
    a = pad.attrs
    if a.get("mode", "constant") != "constant":
        return None
    if "pads" in a or "paddings" in a:  # opsets 1-10
        pads = [int(v) for v in a.get("pads", a.get("paddings", ()))]
        value = float(a.get("value", 0.0))
        axes = list(range(rank))
    else:
        c = ed.const(pad.inputs[1]) if len(pad.inputs) > 1 else None
        if c is None:
            return None
        pads = [int(v) for v in c.reshape(-1)]
        value = 0.0
        if len(pad.inputs) > 2 and pad.inputs[2]:
            v = ed.const(pad.inputs[2])
            if v is None or v.size > 1:
                return None
            value = float(v.reshape(-1)[0]) if v.size else 0.0
        axes = list(range(rank))
        if len(pad.inputs) > 3 and pad.inputs[3]:
            given = ed.const(pad.inputs[3])
            if given is None:
                return None
            axes = [int(i) + rank if int(i) < 0 else int(i) for i in given.reshape(-1)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        return None
    full = [0] * (2 * rank)
    for i, ax in enumerate(axes):
        if not 0 <= ax < rank:
            return None
        full[ax], full[rank + ax] = pads[i], pads[len(axes) + i]
    return full, value


def _rank(ed: GraphEditor, n: Node) -> int | None:
    """The window op's input rank: from its weight (Conv) or kernel_shape (pools)."""
    if n.op_type in ("Conv", "FusedConv"):
        w = ed.const(n.inputs[1]) if len(n.inputs) > 1 else None
        return None if w is None else w.ndim
    k = n.attrs.get("kernel_shape")
    return None if k is None else len(k) + 2


def _folded(n: Node, y: str, pads: list[int], value: float, rank: int) -> Node | None:
    """`n` reading the Pad's input with the pads added, or None if not exact."""
    a = n.attrs
    if n.inputs[0] != y or y in n.inputs[1:] or (len(n.outputs) > 1 and n.outputs[1]):
        return None
    auto = a.get("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID"):
        return None
    nd = rank - 2
    old = [0] * (2 * nd) if auto == "VALID" else list(a.get("pads") or [0] * (2 * nd))
    attrs = dict(a, auto_pad="NOTSET")
    if n.op_type in ("Conv", "FusedConv"):
        if value != 0.0:
            return None
    elif a.get("ceil_mode", 0):
        return None
    elif n.op_type == "AveragePool":
        if value != 0.0 or (any(old) and not a.get("count_include_pad", 0)):
            return None
        attrs["count_include_pad"] = 1
    elif not (math.isinf(value) and value < 0):  # MaxPool
        return None
    if len(old) != 2 * nd:
        return None
    attrs["pads"] = tuple(
        [old[i] + pads[2 + i] for i in range(nd)]
        + [old[nd + i] + pads[rank + 2 + i] for i in range(nd)]
    )
    return Node(n.op_type, n.inputs, n.outputs, attrs, n.name, n.domain)


def fold_pad(g: Graph) -> Graph:
    """`g` with foldable Pads merged into the window ops reading them."""
    if not any(n.op_type == "Pad" and not n.domain for n in g.nodes):
        return g
    ed = GraphEditor(g)
    for pad in ed.nodes:
        if pad.op_type != "Pad" or pad.domain or not pad.inputs[0]:
            continue
        y = pad.outputs[0]
        users = ed.consumers(y)
        if not users or not ed.can_alias(y):
            continue
        if any((u.domain, u.op_type) not in _WINDOW for u in users):
            continue
        ranks = {_rank(ed, u) for u in users}
        rank = ranks.pop() if len(ranks) == 1 else None
        if rank is None or rank < 3:
            continue
        spec = _pads_and_value(ed, pad, rank)
        if spec is None:
            continue
        pads, value = spec
        if any(p < 0 for p in pads) or any(pads[i] or pads[rank + i] for i in (0, 1)):
            continue
        news = [_folded(u, y, pads, value, rank) for u in users]
        if any(v is None for v in news) or not ed.claim([pad, *users]):
            continue
        for u, new in zip(users, news, strict=True):
            assert new is not None
            ins = (pad.inputs[0], *u.inputs[1:])
            ed.replace([u], u, Node(new.op_type, ins, new.outputs, new.attrs, new.name, new.domain))
        ed.remove(pad)
    return ed.build() if ed.changed else g
