"""The decoder graph of llm/graph.py for a batch of sequences, one token each.

Graph interface (rewritten from build_llm_graph(..., last_only=False), fused or not):
  inputs   tokens int64[N] (the next token of N sequences), pos int64[N] (its position),
           slot int64[N] (its KV cache), k_cache.{i} / v_cache.{i} float32[S, C, Hkv, Dh]
  output   logits float32[N, V]

Only the nodes that know about positions or the cache change (ops/llm_batch.py):
RoPE -> RoPERows, KVAttention -> SlotKVAttention, AttnBlock -> SlotAttnBlock, each
with `slot` as a last input where it touches a cache; FFNBlock -> SlotFFNBlock (the
same op with its N-row products prepared). Everything else is row-wise.
"""

from __future__ import annotations

import dataclasses

from onnxexec.ir.graph import Graph, ValueInfo
from onnxexec.ir.types import TensorType

D = "onnxexec"
FLOAT, INT64 = 1, 7
_RENAME = {
    "RoPE": "RoPERows",
    "KVAttention": "SlotKVAttention",
    "AttnBlock": "SlotAttnBlock",
    "FFNBlock": "SlotFFNBlock",
}
_WITH_SLOT = {"KVAttention", "AttnBlock"}


def batch_graph(g: Graph, n_slots: int) -> Graph:
    """The batched variant of a decoder graph with all rows' logits (no LastRow)."""
    if any(n.op_type == "LastRow" and n.domain == D for n in g.nodes):
        raise ValueError("batch_graph needs a decoder graph built with last_only=False")
    nodes = []
    for n in g.nodes:
        if n.domain == D and n.op_type in _RENAME:
            ins = (*n.inputs, "slot") if n.op_type in _WITH_SLOT else n.inputs
            n = dataclasses.replace(n, op_type=_RENAME[n.op_type], inputs=ins)
        nodes.append(n)
    inputs = []
    for v in g.inputs:
        if v.name == "pos":
            inputs.append(ValueInfo("pos", TensorType(INT64, ("N",))))
            inputs.append(ValueInfo("slot", TensorType(INT64, ("N",))))
        elif v.name == "tokens":
            inputs.append(ValueInfo("tokens", TensorType(INT64, ("N",))))
        elif v.name.startswith(("k_cache.", "v_cache.")):
            shape = v.type.shape if isinstance(v.type, TensorType) else None
            inputs.append(ValueInfo(v.name, TensorType(FLOAT, (n_slots, *(shape or ())))))
        else:
            inputs.append(v)
    outputs = tuple(
        ValueInfo(v.name, TensorType(FLOAT, ("N", v.type.shape[1])))
        if isinstance(v.type, TensorType) and v.type.shape
        else v
        for v in g.outputs
    )
    return dataclasses.replace(g, nodes=tuple(nodes), inputs=tuple(inputs), outputs=outputs)
