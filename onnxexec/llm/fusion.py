"""Fuse the decoder graph of llm/graph.py into layer-sized ops (ops/llm_fused.py).

Two steps, both optional and both exact (the fused model computes the same bits):
- `prepare_weights` (at load, from the GGUF tensors) / `fuse_weights` (on prepared
  weights): each layer's Q|K|V and gate|up weights that share a ggml type and are
  relayouted (qmatmul.relayouted) are stacked; the dict's entries are views of the
  stacked arrays, so the graph builder is unchanged. prepare_weights relayouts each
  part straight into the stacked arrays (qmatmul.prepare_fused): no part is ever
  held twice. Weights kept as GGUF bytes stay views of the file mapping.
- `fuse_graph`: rewrites the node chains
    RMSNorm -> QMatMul x3 -> RoPE x2 -> KVAttention -> QMatMul -> Add   => AttnBlock
    RMSNorm -> QMatMul x2 -> GatedAct -> QMatMul -> Add                 => FFNBlock
    RMSNorm -> QMatMul                                                   => NormQMatMul
  when every intermediate value is used only inside the chain. Anything else (Q/K
  biases, per-head norms, post-norms: qwen2, qwen3, gemma3) stays as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from onnxexec.ir.graph import Graph, Node
from onnxexec.kernels.quant.qmatmul import (
    QWeight,
    can_fuse_rows,
    fuse_rows,
    prepare_fused,
    relayouted,
)
from onnxexec.loaders.gguf_reader import GGUFTensor

D = "onnxexec"
_GROUPS = (("attn_q", "attn_k", "attn_v"), ("ffn_gate", "ffn_up"))


def fuse_weights(weights: MutableMapping[str, Any], n_layer: int) -> int:
    """Stack each layer's Q|K|V and gate|up weights in place; returns how many groups.

    When the three attention weights differ in type, the pairs that agree are stacked
    (Q|K in Q4_K_M files, whose V is Q6_K).
    """
    n = 0
    for il in range(n_layer):
        for group in _GROUPS:
            names = [f"blk.{il}.{g}.weight" for g in group]
            ws = [weights.get(name) for name in names]
            for run in _runs(names, ws):
                fused, parts = fuse_rows([weights[name] for name in run])
                del fused
                for name, part in zip(run, parts, strict=True):
                    weights[name] = part
                n += 1
    return n


def prepare_weights(
    tensors: Mapping[str, GGUFTensor],
    n_layer: int,
    prepare: Callable[[GGUFTensor], Any],
    fuse: bool = True,
) -> dict[str, Any]:
    """`prepare(t)` of every tensor, except that with `fuse` each layer's relayouted
    Q|K|V and gate|up runs (as in fuse_weights) are built stacked by prepare_fused."""
    done: dict[str, Any] = {}
    for il in range(n_layer if fuse else 0):
        for group in _GROUPS:
            names = [f"blk.{il}.{g}.weight" for g in group]
            for run in _tensor_runs([tensors.get(name) for name in names]):
                ts = [tensors[name] for name in run]
                _, parts = prepare_fused(
                    [t.data for t in ts], ts[0].ggml_type, [t.shape for t in ts]
                )
                done.update(zip(run, parts, strict=True))
    return {name: done[name] if name in done else prepare(t) for name, t in tensors.items()}


def _tensor_runs(ts: list[GGUFTensor | None]) -> list[list[str]]:
    """Maximal runs of consecutive matrices that prepare_fused can stack (length >= 2):
    one ggml type and row length, all relayouted."""
    out: list[list[str]] = []
    cur: list[GGUFTensor] = []
    for t in ts:
        ok = t is not None and len(t.shape) == 2 and relayouted(t.ggml_type, t.shape[0])
        if ok and cur and (t.ggml_type, t.shape[1]) == (cur[0].ggml_type, cur[0].shape[1]):
            cur.append(t)
            continue
        if len(cur) >= 2:
            out.append([c.name for c in cur])
        cur = [t] if ok else []
    if len(cur) >= 2:
        out.append([c.name for c in cur])
    return out


def _runs(names: list[str], ws: list[Any]) -> list[list[str]]:
    """Maximal runs of consecutive, fusable, not yet fused weights (length >= 2)."""
    out: list[list[str]] = []
    cur: list[str] = []
    for name, w in zip(names, ws, strict=True):
        ok = isinstance(w, QWeight) and w.parent is None and can_fuse_rows([w])
        if ok and cur and can_fuse_rows([ws[names.index(cur[0])], w]):
            cur.append(name)
            continue
        if len(cur) >= 2:
            out.append(cur)
        cur = [name] if ok else []
    if len(cur) >= 2:
        out.append(cur)
    return out


class _Index:
    def __init__(self, g: Graph) -> None:
        self.producer: dict[str, Node] = {}
        self.users: dict[str, list[Node]] = {}
        for n in g.nodes:
            for o in n.outputs:
                self.producer[o] = n
            for i in n.inputs:
                self.users.setdefault(i, []).append(n)
        self.graph_outputs = {v.name for v in g.outputs}

    def made_by(self, name: str, op_type: str, domain: str = D) -> Node | None:
        n = self.producer.get(name)
        if n is None or n.op_type != op_type or n.domain != domain:
            return None
        return n

    def private(self, name: str, users: int = 1) -> bool:
        """Read by exactly `users` nodes and not a graph output."""
        return len(self.users.get(name, ())) == users and name not in self.graph_outputs


def _qmm(ix: _Index, name: str) -> Node | None:
    """The bias-free QMatMul producing `name`."""
    n = ix.made_by(name, "QMatMul")
    return n if n is not None and len(n.inputs) == 2 else None


def _norm(ix: _Index, name: str, users: int) -> Node | None:
    n = ix.made_by(name, "RMSNorm")
    if n is None or n.attrs.get("group", 0) or not ix.private(name, users):
        return None
    return n


def _match_attn(ix: _Index, add: Node) -> tuple[list[Node], Node] | None:
    x, o = add.inputs
    o_mm = _qmm(ix, o)
    if o_mm is None or not ix.private(o):
        return None
    att = ix.made_by(o_mm.inputs[0], "KVAttention")
    if att is None or not ix.private(o_mm.inputs[0]):
        return None
    q_name, k_name, v_name, kc, vc, pos = att.inputs
    rq, rk = ix.made_by(q_name, "RoPE"), ix.made_by(k_name, "RoPE")
    if (
        rq is None
        or rk is None
        or rq.attrs != rk.attrs
        or rq.inputs[1] != pos
        or rk.inputs[1] != pos
        or not (ix.private(q_name) and ix.private(k_name))
    ):
        return None
    mms = [_qmm(ix, rq.inputs[0]), _qmm(ix, rk.inputs[0]), _qmm(ix, v_name)]
    if any(m is None for m in mms) or not all(ix.private(m.outputs[0]) for m in mms):
        return None
    h = mms[0].inputs[0]
    norm = _norm(ix, h, 3)
    modes = {m.attrs.get("mode", "auto") for m in [*mms, o_mm]}
    if norm is None or norm.inputs[0] != x or any(m.inputs[0] != h for m in mms) or len(modes) != 1:
        return None
    attrs = {
        **rq.attrs,
        **att.attrs,
        "epsilon": norm.attrs.get("epsilon", 1e-5),
        "mode": modes.pop(),
    }
    fused = Node(
        "AttnBlock",
        (x, norm.inputs[1], *(m.inputs[1] for m in mms), o_mm.inputs[1], kc, vc, pos),
        add.outputs,
        attrs,
        add.name or add.outputs[0],
        D,
    )
    return [norm, *mms, rq, rk, att, o_mm, add], fused


def _match_ffn(ix: _Index, add: Node) -> tuple[list[Node], Node] | None:
    x, d = add.inputs
    d_mm = _qmm(ix, d)
    if d_mm is None or not ix.private(d):
        return None
    act = ix.made_by(d_mm.inputs[0], "GatedAct")
    if act is None or not ix.private(d_mm.inputs[0]):
        return None
    mms = [_qmm(ix, act.inputs[0]), _qmm(ix, act.inputs[1])]
    if any(m is None for m in mms) or not all(ix.private(m.outputs[0]) for m in mms):
        return None
    h = mms[0].inputs[0]
    norm = _norm(ix, h, 2)
    modes = {m.attrs.get("mode", "auto") for m in [*mms, d_mm]}
    if norm is None or norm.inputs[0] != x or mms[1].inputs[0] != h or len(modes) != 1:
        return None
    attrs = dict(
        epsilon=norm.attrs.get("epsilon", 1e-5), act=act.attrs.get("act", "silu"), mode=modes.pop()
    )
    fused = Node(
        "FFNBlock",
        (x, norm.inputs[1], mms[0].inputs[1], mms[1].inputs[1], d_mm.inputs[1]),
        add.outputs,
        attrs,
        add.name or add.outputs[0],
        D,
    )
    return [norm, *mms, act, d_mm, add], fused


def _match_head(ix: _Index, mm: Node) -> tuple[list[Node], Node] | None:
    if mm.op_type != "QMatMul" or mm.domain != D or len(mm.inputs) != 2:
        return None
    norm = _norm(ix, mm.inputs[0], 1)
    if norm is None:
        return None
    attrs = dict(epsilon=norm.attrs.get("epsilon", 1e-5), mode=mm.attrs.get("mode", "auto"))
    fused = Node(
        "NormQMatMul",
        (norm.inputs[0], norm.inputs[1], mm.inputs[1]),
        mm.outputs,
        attrs,
        mm.name or mm.outputs[0],
        D,
    )
    return [norm, mm], fused


def fuse_graph(g: Graph) -> Graph:
    """The graph with the chains of the module docstring replaced by fused ops."""
    ix = _Index(g)
    replaced: dict[int, Node | None] = {}  # id(node) -> fused node at its last position
    for n in g.nodes:
        if id(n) in replaced:
            continue
        m = None
        if n.op_type == "Add" and n.domain == "" and len(n.inputs) == 2:
            m = _match_attn(ix, n) or _match_ffn(ix, n)
        elif n.op_type == "QMatMul":
            m = _match_head(ix, n)
        if m is None or any(id(old) in replaced for old in m[0]):
            continue
        for old in m[0]:
            replaced[id(old)] = None
        replaced[id(m[0][-1])] = m[1]
    if not replaced:
        return g
    nodes = []
    for n in g.nodes:
        if id(n) not in replaced:
            nodes.append(n)
        elif replaced[id(n)] is not None:
            nodes.append(replaced[id(n)])
    return dataclasses.replace(g, nodes=tuple(nodes))
