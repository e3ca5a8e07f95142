"""LLM pass set: the decoder graph of llm/graph.py fused into layer-sized ops
(ops/llm_fused.py), with the same editor (passes/_editor.py) and pipeline loop
(passes/pipeline.py `fuse_llm`) as the ONNX fusions.

The rewrites, exact (the fused model computes the same bits):
    RMSNorm -> QMatMul x3 -> RoPE x2 -> KVAttention -> QMatMul -> Add   => AttnBlock
    RMSNorm -> QMatMul x2 -> GatedAct -> QMatMul -> Add                 => FFNBlock
    RMSNorm -> QMatMul                                                   => NormQMatMul
when every intermediate value is read only inside the chain. Anything else (Q/K
biases, per-head norms, post-norms: qwen2, qwen3, gemma3) stays as it is. Q|K|V and
gate|up weight stacking is a load-time weight preparation (llm/weights.py).
"""

from __future__ import annotations

from collections.abc import Callable

from onnxexec.ir.graph import Graph, Node
from onnxexec.passes._editor import GraphEditor

D = "onnxexec"


def _qmm(ed: GraphEditor, name: str) -> Node | None:
    """The bias-free QMatMul producing `name`."""
    n = ed.producer_op(name, "QMatMul", domain=D)
    return n if n is not None and len(n.inputs) == 2 else None


def _norm(ed: GraphEditor, name: str) -> Node | None:
    """The whole-row RMSNorm producing `name` (a per-head norm has `group`)."""
    n = ed.producer_op(name, "RMSNorm", domain=D)
    return None if n is None or n.attrs.get("group", 0) else n


def _one_mode(mms: list[Node]) -> str | None:
    modes = {m.attrs.get("mode", "auto") for m in mms}
    return modes.pop() if len(modes) == 1 else None


def _attn(ed: GraphEditor, add: Node) -> tuple[list[Node], Node] | None:
    x, o = add.inputs
    o_mm = _qmm(ed, o)
    att = None if o_mm is None else ed.producer_op(o_mm.inputs[0], "KVAttention", domain=D)
    if o_mm is None or att is None:
        return None
    q_name, k_name, v_name, kc, vc, pos = att.inputs
    rq = ed.producer_op(q_name, "RoPE", domain=D)
    rk = ed.producer_op(k_name, "RoPE", domain=D)
    if rq is None or rk is None or rq.attrs != rk.attrs or {rq.inputs[1], rk.inputs[1]} != {pos}:
        return None
    qkv = [_qmm(ed, rq.inputs[0]), _qmm(ed, rk.inputs[0]), _qmm(ed, v_name)]
    mms = [m for m in qkv if m is not None]
    if len(mms) != 3 or len({m.inputs[0] for m in mms}) != 1:
        return None
    norm = _norm(ed, mms[0].inputs[0])
    mode = _one_mode([*mms, o_mm])
    if norm is None or norm.inputs[0] != x or mode is None:
        return None
    chain = [norm, *mms, rq, rk, att, o_mm, add]
    if not ed.private(chain, add):
        return None
    attrs = {**rq.attrs, **att.attrs, "epsilon": norm.attrs.get("epsilon", 1e-5), "mode": mode}
    ins = (x, norm.inputs[1], *(m.inputs[1] for m in mms), o_mm.inputs[1], kc, vc, pos)
    return chain, Node("AttnBlock", ins, add.outputs, attrs, add.name or add.outputs[0], D)


def _ffn(ed: GraphEditor, add: Node) -> tuple[list[Node], Node] | None:
    x, d = add.inputs
    d_mm = _qmm(ed, d)
    act = None if d_mm is None else ed.producer_op(d_mm.inputs[0], "GatedAct", domain=D)
    if d_mm is None or act is None:
        return None
    gu = [_qmm(ed, act.inputs[0]), _qmm(ed, act.inputs[1])]
    mms = [m for m in gu if m is not None]
    if len(mms) != 2 or mms[0].inputs[0] != mms[1].inputs[0]:
        return None
    norm = _norm(ed, mms[0].inputs[0])
    mode = _one_mode([*mms, d_mm])
    if norm is None or norm.inputs[0] != x or mode is None:
        return None
    chain = [norm, *mms, act, d_mm, add]
    if not ed.private(chain, add):
        return None
    eps = norm.attrs.get("epsilon", 1e-5)
    attrs = dict(epsilon=eps, act=act.attrs.get("act", "silu"), mode=mode)
    ins = (x, norm.inputs[1], mms[0].inputs[1], mms[1].inputs[1], d_mm.inputs[1])
    return chain, Node("FFNBlock", ins, add.outputs, attrs, add.name or add.outputs[0], D)


def _head(ed: GraphEditor, mm: Node) -> tuple[list[Node], Node] | None:
    if len(mm.inputs) != 2:
        return None
    norm = _norm(ed, mm.inputs[0])
    if norm is None or not ed.private([norm, mm], mm):
        return None
    attrs = dict(epsilon=norm.attrs.get("epsilon", 1e-5), mode=mm.attrs.get("mode", "auto"))
    ins = (norm.inputs[0], norm.inputs[1], mm.inputs[1])
    return [norm, mm], Node("NormQMatMul", ins, mm.outputs, attrs, mm.name or mm.outputs[0], D)


def fuse_llm_blocks(g: Graph) -> Graph:
    """`g` with the chains of the module docstring replaced by the fused ops."""
    ed = GraphEditor(g)
    for n in ed.nodes:
        m = None
        if n.op_type == "Add" and not n.domain and len(n.inputs) == 2:
            m = _attn(ed, n) or _ffn(ed, n)
        elif n.op_type == "QMatMul" and n.domain == D:
            m = _head(ed, n)
        if m is not None and ed.claim(m[0]):
            ed.replace(m[0], n, m[1])
    return ed.build() if ed.changed else g


# The pass set passes/pipeline.py's `fuse_llm` runs, in order.
PASSES: list[Callable[[Graph], Graph]] = [fuse_llm_blocks]
