"""Hyper-parameters of a GGUF LLM, read from metadata key templates ("{arch}.block_count").

Defaults and per-architecture conventions follow llama.cpp's llama-model.cpp
(llm_load_hparams): e.g. gemma3 uses a sliding window on 5 of every 6 layers and
rope.freq_base_swa = 10000 on those layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from onnxexec.errors import ModelLoadError

SUPPORTED_ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma3")


class RopeStyle(Enum):
    """NORM rotates adjacent pairs (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n/2])."""

    NORM = "norm"
    NEOX = "neox"


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int  # key_length (== value_length for every supported arch)
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    norm_eps: float
    rope_base: float
    rope_dims: int
    rope_style: RopeStyle
    rope_freq_scale: float = 1.0
    rope_base_swa: float = 10000.0
    sliding_window: int = 0  # 0 = no sliding-window layers
    swa_pattern: int = 0  # every swa_pattern-th layer is global; 0 = all layers SWA
    attn_scale: float = 0.0  # 0 = 1/sqrt(head_dim)
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False  # gemma3: post-attention and post-FFN RMSNorm
    embd_scale: float = 1.0  # gemma3: sqrt(n_embd)
    ffn_act: str = "silu"  # "silu" (SwiGLU) | "gelu_tanh" (GeGLU)

    def is_swa_layer(self, il: int) -> bool:
        """llama.cpp set_swa_pattern(n): layer il is SWA unless il % n == n - 1."""
        if not self.sliding_window:
            return False
        if self.swa_pattern <= 0:
            return True
        return il % self.swa_pattern < self.swa_pattern - 1

    @property
    def scale(self) -> float:
        return self.attn_scale or 1.0 / math.sqrt(self.head_dim)


def _get(md: Mapping[str, Any], key: str, arch: str, default: Any = None,
         required: bool = True) -> Any:
    k = key.format(arch=arch)
    if k in md:
        return md[k]
    if default is not None or not required:
        return default
    raise ModelLoadError(f"GGUF metadata is missing '{k}'")


def config_from_metadata(md: Mapping[str, Any], n_vocab: int | None = None) -> ModelConfig:
    """ModelConfig for a supported architecture; ModelLoadError naming what's missing."""
    arch = md.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelLoadError(
            f"unsupported architecture '{arch}'; onnxexec supports {', '.join(SUPPORTED_ARCHS)}"
        )
    n_embd = int(_get(md, "{arch}.embedding_length", arch))
    n_head = int(_get(md, "{arch}.attention.head_count", arch))
    n_head_kv = int(_get(md, "{arch}.attention.head_count_kv", arch, n_head))
    head_dim = int(_get(md, "{arch}.attention.key_length", arch, n_embd // n_head))
    if n_head % n_head_kv:
        raise ModelLoadError(f"head_count {n_head} is not a multiple of head_count_kv {n_head_kv}")
    vocab = n_vocab or len(md.get("tokenizer.ggml.tokens", ())) or int(
        _get(md, "{arch}.vocab_size", arch))
    scaling = md.get(f"{arch}.rope.scaling.type", "none")
    factor = float(md.get(f"{arch}.rope.scaling.factor", 1.0) or 1.0)
    if scaling not in ("none", "linear") and factor != 1.0:
        raise ModelLoadError(f"unsupported rope scaling type '{scaling}'")
    common: dict[str, Any] = dict(
        arch=arch,
        n_layer=int(_get(md, "{arch}.block_count", arch)),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=int(_get(md, "{arch}.feed_forward_length", arch)),
        n_vocab=int(vocab),
        n_ctx_train=int(_get(md, "{arch}.context_length", arch, 2048)),
        norm_eps=float(_get(md, "{arch}.attention.layer_norm_rms_epsilon", arch, 1e-5)),
        rope_base=float(_get(md, "{arch}.rope.freq_base", arch, 10000.0)),
        rope_dims=int(_get(md, "{arch}.rope.dimension_count", arch, head_dim)),
        rope_style=RopeStyle.NORM if arch in ("llama", "mistral") else RopeStyle.NEOX,
        rope_freq_scale=1.0 / factor,
        attn_softcap=float(md.get(f"{arch}.attn_logit_softcapping", 0.0) or 0.0),
        final_softcap=float(md.get(f"{arch}.final_logit_softcapping", 0.0) or 0.0),
    )
    if arch == "qwen2":
        common["qkv_bias"] = True
    elif arch == "qwen3":
        common["qk_norm"] = True
    elif arch == "gemma3":
        window = int(md.get(f"{arch}.attention.sliding_window", 0) or 0)
        common.update(
            qk_norm=True,
            post_norms=True,
            embd_scale=math.sqrt(n_embd),
            ffn_act="gelu_tanh",
            sliding_window=window,
            swa_pattern=int(md.get(f"{arch}.attention.sliding_window_pattern", 6) or 6),
            rope_base_swa=float(md.get(f"{arch}.rope.freq_base_swa", 10000.0)),
            rope_base=float(_get(md, "{arch}.rope.freq_base", arch, 1_000_000.0)),
            norm_eps=float(_get(md, "{arch}.attention.layer_norm_rms_epsilon", arch, 1e-6)),
        )
    return ModelConfig(**common)
