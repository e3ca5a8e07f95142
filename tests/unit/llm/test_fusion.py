"""The LLM pass set (passes/llm_blocks.py, run by passes/pipeline.fuse_llm): the fused
decoder graph computes exactly what the unfused one does.

Tiny llama GGUFs of models/build_tiny_gguf.py (n_embd 256, every weight type the fused
ops treat differently) run through two plans with their own KV caches: the one LLM
builds (llm/weights.py stacking + fuse_llm) and one built from freshly prepared, unfused
weights. Logits of a prompt and of single-token steps must be bit-identical.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from onnxexec.ir.graph import Graph, Node
from onnxexec.llm.graph import build_llm_graph
from onnxexec.llm.model import LLM, prepare_tensor
from onnxexec.passes.pipeline import fuse_llm
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import plan_graph

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "models"))

TYPES = ["Q4_0", "Q4_1", "Q8_0", "Q5_0", "Q4_K", "Q6_K", "F16"]
PROMPT = [1, 17, 204, 99, 1023, 5]


def _run(plan, llm: LLM, tokens: list[list[int]]) -> list[np.ndarray]:
    c = llm.config
    shape = (llm.n_ctx, c.n_head_kv, c.head_dim)
    feeds = {}
    for il in range(c.n_layer):
        feeds[f"k_cache.{il}"] = np.zeros(shape, np.float32)
        feeds[f"v_cache.{il}"] = np.zeros(shape, np.float32)
    out, pos = [], 0
    for chunk in tokens:
        feeds["tokens"] = np.asarray(chunk, np.int64)
        feeds["pos"] = np.asarray(pos, np.int64)
        out.append(execute(plan, feeds)[0])
        pos += len(chunk)
    return out


@pytest.mark.parametrize("wtype", TYPES)
def test_fused_graph_is_bit_exact(wtype, vocab, tmp_path):
    import build_tiny_gguf

    path = build_tiny_gguf.build_tiny_gguf("llama", wtype, tmp_path / "m.gguf", vocab)
    llm = LLM(path, n_ctx=32, threads=1, warmup=False)
    fused = llm.plan(last_only=False)
    ops = [s.node.op_type for s in fused.steps]
    n = llm.config.n_layer
    assert ops.count("AttnBlock") == n and ops.count("FFNBlock") == n
    assert ops.count("NormQMatMul") == 1 and "RMSNorm" not in ops

    plain = {name: prepare_tensor(t) for name, t in llm.gguf.tensors.items()}
    g = build_llm_graph(llm.config, plain, n_ctx=llm.n_ctx, last_only=False, options=llm.options)
    unfused = plan_graph(g)
    steps = [PROMPT, [7], [300], [41]]
    for a, b in zip(_run(fused, llm, steps), _run(unfused, llm, steps), strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _chain(prefix: str, extra_user: bool) -> list[Node]:
    D = "onnxexec"
    nodes = [
        Node("RMSNorm", ("x", "wn"), ("h",), {"epsilon": 1e-5}, "", D),
        Node("QMatMul", ("h", "wg"), ("g",), {"mode": "int8"}, "", D),
        Node("QMatMul", ("h", "wu"), ("u",), {"mode": "int8"}, "", D),
        Node("GatedAct", ("g", "u"), ("f",), {"act": "silu"}, "", D),
        Node("QMatMul", ("f", "wd"), ("d",), {"mode": "int8"}, "", D),
        Node("Add", ("x", "d"), (f"{prefix}y",)),
    ]
    if extra_user:
        nodes.append(Node("Identity", ("g",), ("g_copy",)))
    return nodes


@pytest.mark.parametrize("extra_user", [False, True])
def test_ffn_pattern_needs_private_intermediates(extra_user):
    from onnxexec.ir.graph import ValueInfo
    from onnxexec.ir.types import TensorType

    t = TensorType(1, ("T", 8))
    outs = [ValueInfo("y", t)] + ([ValueInfo("g_copy", t)] if extra_user else [])
    g = Graph(
        tuple(_chain("", extra_user)),
        (ValueInfo("x", t),),
        tuple(outs),
        {k: np.zeros(8, np.float32) for k in ("wn", "wg", "wu", "wd")},
        opset_imports={"": 21, "onnxexec": 1},
    )
    ops = [n.op_type for n in fuse_llm(g).nodes]
    if extra_user:  # g is read outside the chain: nothing may be fused away
        assert "FFNBlock" not in ops and ops.count("QMatMul") == 3
    else:
        assert ops == ["FFNBlock"]
