"""A tiny float32 GGUF decoder (any supported arch) with a byte-level BPE vocabulary,
written with gguf-py, and an independent numpy forward pass to check onnxexec against.

The reference reads the weights back with gguf-py's GGUFReader and writes the forward
pass out from the architecture descriptions (llama.cpp src/models/*.cpp) in float64,
one position at a time with an explicit causal loop: nothing is shared with
onnxexec.llm.graph or onnxexec.ops.llm.
"""

from __future__ import annotations

import math
from pathlib import Path

import gguf
import numpy as np

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 64, 4, 2, 16, 96
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s", "r e", "a t"]


def byte_chars() -> list[str]:
    """GPT-2's byte -> printable character map, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def vocab() -> tuple[list[str], list[int]]:
    tokens = SPECIALS + byte_chars() + [m.replace(" ", "") for m in MERGES]
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return tokens, types


def write_tiny_gguf(
    path: Path,
    arch: str = "llama",
    seed: int = 0,
    n_layer: int = 2,
    window: int = 0,
    softcap: float = 0.0,
    wtype: str = "F32",
) -> Path:
    """Random weights at scales that keep logits spread over a few units; matrices
    stored as `wtype` (F32, or a type gguf-py can quantize: Q4_0, Q8_0, ...)."""
    rng = np.random.default_rng(seed)
    tokens, types = vocab()
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(10000.0 if arch == "llama" else 1e6)
    w.add_layer_norm_rms_eps(1e-5)
    if arch == "gemma3":
        if window:
            w.add_sliding_window(window)
            w.add_uint32("gemma3.attention.sliding_window_pattern", 2)
        if softcap:
            w.add_float32("gemma3.final_logit_softcapping", softcap)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(arch in ("llama", "gemma3"))

    qtype = gguf.GGMLQuantizationType[wtype]

    def put(name: str, x: np.ndarray) -> None:
        """Matrices in `wtype` (gguf-py's quantizer), vectors in F32."""
        if x.ndim == 2 and wtype != "F32":
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, x)

    def mat(rows: int, k: int, gain: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, k)) * gain / math.sqrt(k)).astype(np.float32)

    def vec(n: int, mean: float = 1.0) -> np.ndarray:
        return (mean + 0.1 * rng.standard_normal(n)).astype(np.float32)

    qd, kvd = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    put("token_embd.weight", (0.5 * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float32))
    for il in range(n_layer):
        p = f"blk.{il}"
        put(f"{p}.attn_norm.weight", vec(N_EMBD))
        for name, rows in (("q", qd), ("k", kvd), ("v", kvd)):
            put(f"{p}.attn_{name}.weight", mat(rows, N_EMBD, 2.0))
            if arch == "qwen2":
                put(f"{p}.attn_{name}.bias", vec(rows, 0.0))
        if arch in ("qwen3", "gemma3"):
            put(f"{p}.attn_q_norm.weight", vec(HEAD_DIM))
            put(f"{p}.attn_k_norm.weight", vec(HEAD_DIM))
        put(f"{p}.attn_output.weight", mat(N_EMBD, qd))
        if arch == "gemma3":
            put(f"{p}.post_attention_norm.weight", vec(N_EMBD))
        put(f"{p}.ffn_norm.weight", vec(N_EMBD))
        put(f"{p}.ffn_gate.weight", mat(N_FF, N_EMBD, 1.5))
        put(f"{p}.ffn_up.weight", mat(N_FF, N_EMBD))
        put(f"{p}.ffn_down.weight", mat(N_EMBD, N_FF))
        if arch == "gemma3":
            put(f"{p}.post_ffw_norm.weight", vec(N_EMBD))
    put("output_norm.weight", vec(N_EMBD))
    if arch in ("llama", "qwen3"):
        put("output.weight", mat(n_vocab, N_EMBD, 4.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class Reference:
    """Float64 forward pass of a tiny GGUF written by write_tiny_gguf."""

    def __init__(self, path: Path) -> None:
        r = gguf.GGUFReader(path)
        self.arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        self.t = {
            t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            for t in r.tensors
        }
        f = {
            k: v.parts[v.data[0]][0]
            for k, v in r.fields.items()
            if v.types
            and v.types[0] != gguf.GGUFValueType.ARRAY
            and v.types[0] != gguf.GGUFValueType.STRING
        }
        a = self.arch
        self.n_layer = int(f[f"{a}.block_count"])
        self.eps = float(f[f"{a}.attention.layer_norm_rms_epsilon"])
        self.base = float(f[f"{a}.rope.freq_base"])
        self.window = int(f.get(f"{a}.attention.sliding_window", 0))
        self.pattern = int(f.get(f"{a}.attention.sliding_window_pattern", 6))
        self.softcap = float(f.get(f"{a}.final_logit_softcapping", 0.0))

    @staticmethod
    def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

    def rope(self, x: np.ndarray, p: int, base: float) -> np.ndarray:
        """x (H, Dh) at position p; llama rotates pairs (2i, 2i+1), the others (i, i+Dh/2)."""
        d = x.shape[-1]
        out = x.copy()
        for i in range(d // 2):
            theta = p * base ** (-2.0 * i / d)
            c, s = math.cos(theta), math.sin(theta)
            a, b = (2 * i, 2 * i + 1) if self.arch == "llama" else (i, i + d // 2)
            out[:, a] = x[:, a] * c - x[:, b] * s
            out[:, b] = x[:, a] * s + x[:, b] * c
        return out

    def forward(self, ids: list[int]) -> np.ndarray:
        """Logits (T, V) for the token sequence from position 0."""
        t, a = self.t, self.arch
        gemma = a == "gemma3"
        x = t["token_embd.weight"][ids] * (math.sqrt(N_EMBD) if gemma else 1.0)
        T = len(ids)
        for il in range(self.n_layer):
            p = f"blk.{il}"
            swa = gemma and self.window > 0 and il % self.pattern < self.pattern - 1
            h = self.rmsnorm(x, t[f"{p}.attn_norm.weight"], self.eps)
            q, k, v = (h @ t[f"{p}.attn_{n}.weight"].T for n in "qkv")
            if a == "qwen2":
                q, k, v = (
                    m + t[f"{p}.attn_{n}.bias"] for m, n in zip((q, k, v), "qkv", strict=True)
                )
            q = q.reshape(T, N_HEAD, HEAD_DIM)
            k = k.reshape(T, N_HEAD_KV, HEAD_DIM)
            v = v.reshape(T, N_HEAD_KV, HEAD_DIM)
            if a in ("qwen3", "gemma3"):
                q = self.rmsnorm(q, t[f"{p}.attn_q_norm.weight"], self.eps)
                k = self.rmsnorm(k, t[f"{p}.attn_k_norm.weight"], self.eps)
            base = 10000.0 if swa else self.base
            q = np.stack([self.rope(q[i], i, base) for i in range(T)])
            k = np.stack([self.rope(k[i], i, base) for i in range(T)])
            att = np.zeros((T, N_HEAD, HEAD_DIM))
            for i in range(T):
                for hh in range(N_HEAD):
                    kv = hh // (N_HEAD // N_HEAD_KV)
                    js = [j for j in range(i + 1) if not (swa and i - j >= self.window)]
                    s = np.array([q[i, hh] @ k[j, kv] for j in js]) / math.sqrt(HEAD_DIM)
                    e = np.exp(s - s.max())
                    att[i, hh] = (e / e.sum()) @ v[js, kv]
            o = att.reshape(T, -1) @ t[f"{p}.attn_output.weight"].T
            if gemma:
                o = self.rmsnorm(o, t[f"{p}.post_attention_norm.weight"], self.eps)
            x = x + o
            h = self.rmsnorm(x, t[f"{p}.ffn_norm.weight"], self.eps)
            g = h @ t[f"{p}.ffn_gate.weight"].T
            u = h @ t[f"{p}.ffn_up.weight"].T
            if gemma:
                act = 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))
            else:
                act = g / (1 + np.exp(-g))
            d = (act * u) @ t[f"{p}.ffn_down.weight"].T
            if gemma:
                d = self.rmsnorm(d, t[f"{p}.post_ffw_norm.weight"], self.eps)
            x = x + d
        x = self.rmsnorm(x, t["output_norm.weight"], self.eps)
        logits = x @ t.get("output.weight", t["token_embd.weight"]).T
        if self.softcap:
            logits = self.softcap * np.tanh(logits / self.softcap)
        return logits
