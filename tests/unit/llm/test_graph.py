"""Structure of the LLM IR graph: node types per layer, wiring, attributes, interface."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from onnxexec.errors import ModelLoadError
from onnxexec.llm.config import config_from_metadata
from onnxexec.llm.graph import GraphOptions, build_llm_graph
from onnxexec.runtime.plan import plan_graph
from tests.unit.llm.test_config import meta

D, H, HKV, FF, V = 512, 8, 2, 1024, 100


def weights(arch: str, n_layer: int, tied: bool) -> dict[str, np.ndarray]:
    dh = D // H
    w = {
        "token_embd.weight": np.zeros((V, D), np.float32),
        "output_norm.weight": np.ones(D, np.float32),
    }
    if not tied:
        w["output.weight"] = np.zeros((V, D), np.float32)
    for il in range(n_layer):
        p = f"blk.{il}"
        shapes = {
            "attn_norm.weight": (D,),
            "attn_q.weight": (D, D),
            "attn_k.weight": (HKV * dh, D),
            "attn_v.weight": (HKV * dh, D),
            "attn_output.weight": (D, D),
            "ffn_norm.weight": (D,),
            "ffn_gate.weight": (FF, D),
            "ffn_up.weight": (FF, D),
            "ffn_down.weight": (D, FF),
        }
        if arch == "qwen2":
            shapes.update(
                {"attn_q.bias": (D,), "attn_k.bias": (HKV * dh,), "attn_v.bias": (HKV * dh,)}
            )
        if arch in ("qwen3", "gemma3"):
            shapes.update({"attn_q_norm.weight": (dh,), "attn_k_norm.weight": (dh,)})
        if arch == "gemma3":
            shapes.update({"post_attention_norm.weight": (D,), "post_ffw_norm.weight": (D,)})
        w.update({f"{p}.{k}": np.zeros(s, np.float32) for k, s in shapes.items()})
    return w


def build(arch: str, last_only: bool = True, tied: bool = False, **md):
    extra = {"{arch}.attention.head_count_kv": HKV, **md}
    cfg = config_from_metadata(meta(arch, **extra), n_vocab=V)
    return cfg, build_llm_graph(
        cfg, weights(arch, cfg.n_layer, tied), n_ctx=32, last_only=last_only
    )


def layer_ops(g, il: int) -> Counter:
    return Counter(n.op_type for n in g.nodes if n.name.startswith(f"blk.{il}."))


# per layer: norms, projections, rope, attention, activation, residual adds
EXPECTED = {
    "llama": {"RMSNorm": 2, "QMatMul": 7, "RoPE": 2, "KVAttention": 1, "GatedAct": 1, "Add": 2},
    "qwen2": {"RMSNorm": 2, "QMatMul": 7, "RoPE": 2, "KVAttention": 1, "GatedAct": 1, "Add": 2},
    "qwen3": {"RMSNorm": 4, "QMatMul": 7, "RoPE": 2, "KVAttention": 1, "GatedAct": 1, "Add": 2},
    "gemma3": {"RMSNorm": 6, "QMatMul": 7, "RoPE": 2, "KVAttention": 1, "GatedAct": 1, "Add": 2},
}


@pytest.mark.parametrize("arch", sorted(EXPECTED))
def test_ops_per_layer(arch):
    cfg, g = build(arch)
    for il in range(cfg.n_layer):
        assert layer_ops(g, il) == Counter(EXPECTED[arch])
    top = Counter(n.op_type for n in g.nodes if not n.name.startswith("blk."))
    assert top == Counter({"QEmbedding": 1, "LastRow": 1, "RMSNorm": 1, "QMatMul": 1})
    assert len(g.nodes) == cfg.n_layer * sum(EXPECTED[arch].values()) + 4
    plan_graph(g)  # every op resolves in the registry


def test_interface_and_initializers():
    cfg, g = build("llama", last_only=False)
    names = [v.name for v in g.inputs]
    assert names[:2] == ["tokens", "pos"]
    assert names[2:] == [f"{kv}_cache.{i}" for i in range(cfg.n_layer) for kv in "kv"]
    assert g.inputs[2].type.shape == (32, HKV, D // H)
    assert [v.name for v in g.outputs] == ["logits"] and g.outputs[0].type.shape == ("T", V)
    assert "LastRow" not in {n.op_type for n in g.nodes}
    assert set(g.initializers) == set(weights("llama", cfg.n_layer, False))


def test_qwen2_biases_feed_the_projections():
    _, g = build("qwen2")
    q = next(n for n in g.nodes if n.name == "blk.0.q")
    assert q.inputs == ("blk.0.attn_norm", "blk.0.attn_q.weight", "blk.0.attn_q.bias")


def test_tied_head_reuses_token_embd():
    _, g = build("qwen2", tied=True)
    head = g.nodes[-1]
    assert head.op_type == "QMatMul" and head.inputs[1] == "token_embd.weight"
    assert "output.weight" not in g.initializers


def test_gemma3_attributes():
    cfg, g = build(
        "gemma3",
        tied=True,
        **{
            "{arch}.attention.sliding_window": 16,
            "{arch}.attention.sliding_window_pattern": 2,
            "{arch}.final_logit_softcapping": 30.0,
            "{arch}.rope.freq_base": 1e6,
        },
    )
    emb = g.nodes[0]
    assert emb.op_type == "QEmbedding" and emb.attrs["scale"] == pytest.approx(D**0.5)
    attn = [n for n in g.nodes if n.op_type == "KVAttention"]
    assert [a.attrs["window"] for a in attn] == [16, 0, 16, 0]
    assert all(
        a.attrs["scale"] == 1.0 and a.attrs["q_scale"] == pytest.approx(cfg.scale) for a in attn
    )
    assert all(a.attrs["kv_f16"] == 1 for a in attn)
    bases = [n.attrs["base"] for n in g.nodes if n.op_type == "RoPE"]
    assert bases == [1e4, 1e4, 1e6, 1e6, 1e4, 1e4, 1e6, 1e6]
    assert {n.attrs["act"] for n in g.nodes if n.op_type == "GatedAct"} == {"gelu_tanh_f16"}
    assert g.nodes[-1].op_type == "Softcap" and g.nodes[-1].attrs["cap"] == 30.0
    assert g.nodes[-1].outputs == ("logits",)


def test_options_reach_the_nodes():
    cfg = config_from_metadata(meta("gemma3"), n_vocab=V)
    g = build_llm_graph(
        cfg,
        weights("gemma3", cfg.n_layer, True),
        n_ctx=8,
        options=GraphOptions(kv_f16=False, ggml_act=False, matmul_mode="int8"),
    )
    assert {n.attrs["act"] for n in g.nodes if n.op_type == "GatedAct"} == {"gelu_tanh"}
    assert {n.attrs["kv_f16"] for n in g.nodes if n.op_type == "KVAttention"} == {0}
    assert {n.attrs["mode"] for n in g.nodes if n.op_type == "QMatMul"} == {"int8"}


def test_missing_tensor_is_named():
    cfg = config_from_metadata(meta("qwen2"), n_vocab=V)
    w = weights("qwen2", cfg.n_layer, False)
    del w["blk.1.attn_k.bias"]
    with pytest.raises(ModelLoadError, match=r"blk\.1\.attn_k\.bias"):
        build_llm_graph(cfg, w, n_ctx=8)
