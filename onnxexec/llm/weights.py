"""Load-time weight preparation for the fused decoder (exact: same bits).

`prepare_weights` (at load, from the GGUF tensors) / `fuse_weights` (on prepared
weights): each layer's Q|K|V and gate|up weights that share a ggml type and are
relayouted (qmatmul.relayouted) are stacked; the dict's entries are views of the
stacked arrays, so the graph builder is unchanged. prepare_weights relayouts each part
straight into the stacked arrays (qmatmul.prepare_fused): no part is ever held twice.
Weights kept as GGUF bytes stay views of the file mapping. The graph side, the
layer-sized ops that read the stacked products, is the LLM pass set
(passes/llm_blocks.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from onnxexec.kernels.quant.qmatmul import (
    QWeight,
    can_fuse_rows,
    fuse_rows,
    prepare_fused,
    relayouted,
)
from onnxexec.loaders.gguf_reader import GGUFTensor

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
