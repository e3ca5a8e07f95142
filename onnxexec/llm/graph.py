"""Build a GGUF decoder LLM as an onnxexec IR graph (run by the normal executor).

Graph interface:
  inputs   tokens int64[T], pos int64[] (position of tokens[0]),
           k_cache.{i} / v_cache.{i} float32[C, Hkv, Dh] (written in place by KVAttention)
  output   logits float32[T, V] (or [1, V] with last_only: only the last position)

Weights keep their GGUF tensor names as initializers. The layer structure follows
llama.cpp's src/models/{llama,qwen2,qwen3,gemma3}.cpp: pre-norm attention and
gated FFN with residual adds; qwen2 adds Q/K/V biases, qwen3/gemma3 per-head Q/K
RMSNorm, gemma3 scaled embeddings, post-attention/post-FFN norms and GeGLU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onnxexec.errors import ModelLoadError
from onnxexec.ir.graph import Graph, Node, ValueInfo
from onnxexec.ir.types import TensorType
from onnxexec.llm.config import ModelConfig

D = "onnxexec"
FLOAT, INT64 = 1, 7


@dataclass(frozen=True)
class GraphOptions:
    """Numerics switches; the defaults reproduce llama.cpp's CPU defaults.

    kv_f16: store K/V rounded to half precision (llama.cpp's default F16 KV cache) and
        compute attention with ggml's rounding.
    ggml_act: SiLU with ggml's vectorized expf, GELU through ggml's half-precision
        lookup table (GGML_GELU_FP16); else float32 formulas.
    matmul_mode: qmatmul mode for quantized weights: "int8" (activations quantized as
        llama.cpp does; also the fastest here), "auto" or "float".
    fuse: let LLM stack Q|K|V and gate|up weights (llm/weights.py) and run this
        graph's layers as fused ops (passes/llm_blocks.py; same results); False keeps
        one node per op, e.g. to inspect every intermediate value.
    """

    kv_f16: bool = True
    ggml_act: bool = True
    matmul_mode: str = "int8"
    fuse: bool = True


class _Builder:
    def __init__(self, cfg: ModelConfig, weights: Mapping[str, Any], opts: GraphOptions) -> None:
        self.cfg = cfg
        self.opts = opts
        self.weights = weights
        self.nodes: list[Node] = []
        self.inits: dict[str, Any] = {}

    def w(self, name: str, required: bool = True) -> str | None:
        if name in self.weights:
            self.inits[name] = self.weights[name]
            return name
        if required:
            raise ModelLoadError(f"GGUF file has no tensor '{name}' ({self.cfg.arch} needs it)")
        return None

    def add(self, op_type: str, inputs: list[str], out: str, domain: str = D, **attrs: Any) -> str:
        self.nodes.append(Node(op_type, tuple(inputs), (out,), attrs, out, domain))
        return out

    def norm(self, x: str, weight: str, out: str, group: int = 0) -> str:
        return self.add("RMSNorm", [x, weight], out, epsilon=self.cfg.norm_eps, group=group)

    def linear(self, x: str, weight: str, out: str, bias: str | None = None) -> str:
        return self.add(
            "QMatMul", [x, weight] + ([bias] if bias else []), out, mode=self.opts.matmul_mode
        )

    def layer(self, il: int, x: str) -> str:
        c = self.cfg
        p = f"blk.{il}"
        h = self.norm(x, self.w(f"{p}.attn_norm.weight"), f"{p}.attn_norm")
        qkv = []
        for name in ("q", "k", "v"):
            bias = self.w(f"{p}.attn_{name}.bias", required=c.qkv_bias)
            qkv.append(self.linear(h, self.w(f"{p}.attn_{name}.weight"), f"{p}.{name}", bias))
        q, k, v = qkv
        if c.qk_norm:
            q = self.norm(q, self.w(f"{p}.attn_q_norm.weight"), f"{p}.q_norm", c.head_dim)
            k = self.norm(k, self.w(f"{p}.attn_k_norm.weight"), f"{p}.k_norm", c.head_dim)
        swa = c.is_swa_layer(il)
        base = c.rope_base_swa if swa else c.rope_base
        freq_scale = 1.0 if swa else c.rope_freq_scale
        rope = dict(
            head_dim=c.head_dim,
            n_dims=c.rope_dims,
            base=base,
            freq_scale=freq_scale,
            style=c.rope_style.value,
        )
        q = self.add("RoPE", [q, "pos"], f"{p}.q_rope", **rope)
        k = self.add("RoPE", [k, "pos"], f"{p}.k_rope", **rope)
        scales = dict(q_scale=c.scale, scale=1.0) if c.q_prescale else dict(scale=c.scale)
        a = self.add(
            "KVAttention",
            [q, k, v, f"k_cache.{il}", f"v_cache.{il}", "pos"],
            f"{p}.attn",
            head_dim=c.head_dim,
            window=c.sliding_window if swa else 0,
            kv_f16=int(self.opts.kv_f16),
            **scales,
        )
        o = self.linear(a, self.w(f"{p}.attn_output.weight"), f"{p}.attn_out")
        if c.post_norms:
            o = self.norm(o, self.w(f"{p}.post_attention_norm.weight"), f"{p}.attn_post_norm")
        x = self.add("Add", [x, o], f"{p}.attn_residual", domain="")
        h = self.norm(x, self.w(f"{p}.ffn_norm.weight"), f"{p}.ffn_norm")
        g = self.linear(h, self.w(f"{p}.ffn_gate.weight"), f"{p}.ffn_gate")
        u = self.linear(h, self.w(f"{p}.ffn_up.weight"), f"{p}.ffn_up")
        act = c.ffn_act
        if self.opts.ggml_act:
            act += "_f16" if act == "gelu_tanh" else "_ggml"
        f = self.add("GatedAct", [g, u], f"{p}.ffn_act", act=act)
        d = self.linear(f, self.w(f"{p}.ffn_down.weight"), f"{p}.ffn_down")
        if c.post_norms:
            d = self.norm(d, self.w(f"{p}.post_ffw_norm.weight"), f"{p}.ffn_post_norm")
        return self.add("Add", [x, d], f"{p}.out", domain="")


def build_llm_graph(
    cfg: ModelConfig,
    weights: Mapping[str, Any],
    *,
    n_ctx: int,
    last_only: bool = True,
    name: str = "llm",
    options: GraphOptions | None = None,
) -> Graph:
    """The whole decoder as a Graph; `weights` maps GGUF tensor names to prepared weights."""
    b = _Builder(cfg, weights, options or GraphOptions())
    emb = b.w("token_embd.weight")
    x = b.add("QEmbedding", ["tokens", emb], "embd", scale=cfg.embd_scale)
    for il in range(cfg.n_layer):
        x = b.layer(il, x)
    if last_only:
        x = b.add("LastRow", [x], "last")
    x = b.norm(x, b.w("output_norm.weight"), "result_norm")
    head = b.w("output.weight", required=False) or emb  # tied embeddings
    capped = cfg.final_softcap > 0
    logits = b.linear(x, head, "logits_raw" if capped else "logits")
    if capped:
        logits = b.add("Softcap", [logits], "logits", cap=cfg.final_softcap)
    cache = TensorType(FLOAT, (n_ctx, cfg.n_head_kv, cfg.head_dim))
    inputs = [
        ValueInfo("tokens", TensorType(INT64, ("T",))),
        ValueInfo("pos", TensorType(INT64, ())),
    ]
    for il in range(cfg.n_layer):
        inputs += [ValueInfo(f"k_cache.{il}", cache), ValueInfo(f"v_cache.{il}", cache)]
    rows = 1 if last_only else "T"
    outputs = [ValueInfo(logits, TensorType(FLOAT, (rows, cfg.n_vocab)))]
    return Graph(
        tuple(b.nodes),
        tuple(inputs),
        tuple(outputs),
        b.inits,
        opset_imports={"": 21, D: 1},
        name=name,
        metadata={"producer_name": "onnxexec (GGUF loader)"},
    )
