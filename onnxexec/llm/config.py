"""Hyper-parameters of a GGUF LLM, read from metadata key templates ("{arch}.block_count").

Required keys, defaults and per-architecture conventions follow llama.cpp
(src/llama-model.cpp load_hparams and src/models/<arch>.cpp load_arch_hparams):
rope.freq_base defaults to 10000, head_count_kv to head_count, key_length to
n_embd / n_head, rope.dimension_count to key_length; rope scaling factor f gives
freq_scale 1/f. gemma3 with attention.sliding_window uses the window on the layers
of sliding_window_pattern (an int n: layer il is SWA unless il % n == n - 1; default
6; or a per-layer bool array), and rope.freq_base_swa (default 10000) on those layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from onnxexec.errors import GGUFError

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3", "gemma3")


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
    swa_layers: tuple[bool, ...] = ()  # per layer: uses the sliding window
    attn_scale: float = 0.0  # 0 = 1/sqrt(head_dim)
    q_prescale: bool = False  # gemma3: Q is multiplied by `scale`, scores are not
    final_softcap: float = 0.0
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False  # gemma3: post-attention and post-FFN RMSNorm
    embd_scale: float = 1.0  # gemma3: sqrt(n_embd)
    ffn_act: str = "silu"  # "silu" (SwiGLU) | "gelu_tanh" (GeGLU)

    def is_swa_layer(self, il: int) -> bool:
        return bool(self.sliding_window) and bool(self.swa_layers) and self.swa_layers[il]

    @property
    def scale(self) -> float:
        return self.attn_scale or 1.0 / math.sqrt(self.head_dim)


def swa_pattern(n_layer: int, pattern: int | list | tuple) -> tuple[bool, ...]:
    """llama.cpp set_swa_pattern(n): layer il is SWA unless il % n == n - 1 (n = 0: all
    layers); a bool array gives each layer's flag directly."""
    if isinstance(pattern, list | tuple):
        if len(pattern) < n_layer:
            raise GGUFError(
                f"sliding_window_pattern has {len(pattern)} entries for {n_layer} layers"
            )
        return tuple(bool(p) for p in pattern[:n_layer])
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 0:
        raise GGUFError(
            f"sliding_window_pattern must be an integer >= 0 or a bool array, got {pattern!r:.80}"
        )
    n = pattern
    return tuple(n == 0 or il % n < n - 1 for il in range(n_layer))


def _key(md: Mapping[str, Any], key: str, arch: str, default: Any = None) -> Any:
    """Metadata value of key template `key`; GGUFError when missing and no default."""
    k = key.format(arch=arch)
    if k in md:
        return md[k]
    if default is None:
        raise GGUFError(f"GGUF metadata is missing '{k}' (required for {arch})")
    return default


# Upper bounds far above any released model: they only keep a crafted file from
# sizing a loop or an allocation (llama.cpp trusts these keys).
_MAX_INT = {
    "block_count": 1 << 12,
    "embedding_length": 1 << 18,
    "attention.head_count": 1 << 12,
    "attention.head_count_kv": 1 << 12,
    "attention.key_length": 1 << 14,
    "attention.value_length": 1 << 14,
    "rope.dimension_count": 1 << 14,
    "feed_forward_length": 1 << 20,
    "context_length": 1 << 24,
    "attention.sliding_window": 1 << 24,
}


def _int(md: Mapping[str, Any], key: str, arch: str, default: Any = None, lo: int = 1) -> int:
    """An integer key in [lo, _MAX_INT[key]]; GGUFError naming the key otherwise."""
    v = _key(md, "{arch}." + key, arch, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise GGUFError(f"GGUF metadata '{arch}.{key}' must be an integer, got {v!r:.80}")
    hi = _MAX_INT[key]
    if not lo <= v <= hi:
        raise GGUFError(f"GGUF metadata '{arch}.{key}' = {v} is outside [{lo}, {hi}]")
    return v


def _float(
    md: Mapping[str, Any], key: str, arch: str, default: Any = None, positive: bool = True
) -> float:
    """A finite number key, > 0 (positive) or >= 0; GGUFError naming the key otherwise."""
    v = _key(md, "{arch}." + key, arch, default)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise GGUFError(f"GGUF metadata '{arch}.{key}' must be a number, got {v!r:.80}")
    f = float(v)
    if not math.isfinite(f) or f < 0 or (positive and f == 0):
        need = "> 0" if positive else ">= 0"
        raise GGUFError(f"GGUF metadata '{arch}.{key}' = {v} must be finite and {need}")
    return f


def _int_key(md: Mapping[str, Any], key: str) -> int:
    v = md.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise GGUFError(f"GGUF metadata '{key}' must be an integer, got {v!r:.80}")
    return v


def config_from_metadata(md: Mapping[str, Any], n_vocab: int | None = None) -> ModelConfig:
    """ModelConfig for a supported architecture; GGUFError naming what's missing."""
    arch = md.get("general.architecture")
    if not isinstance(arch, str) or arch not in SUPPORTED_ARCHS:
        raise GGUFError(
            f"unsupported architecture '{arch!s:.80}'; "
            f"onnxexec supports {', '.join(SUPPORTED_ARCHS)}"
        )
    n_layer = _int(md, "block_count", arch)
    n_embd = _int(md, "embedding_length", arch)
    n_head = _int(md, "attention.head_count", arch)
    n_head_kv = _int(md, "attention.head_count_kv", arch, n_head)
    head_dim = _int(md, "attention.key_length", arch, max(n_embd // n_head, 1))
    value_dim = _int(md, "attention.value_length", arch, head_dim)
    if n_head % n_head_kv:
        raise GGUFError(f"head_count {n_head} is not a multiple of head_count_kv {n_head_kv}")
    if value_dim != head_dim:
        raise GGUFError(f"key_length {head_dim} != value_length {value_dim} is not supported")
    if n_vocab is None:
        tokens = md.get("tokenizer.ggml.tokens")
        vocab = len(tokens) if isinstance(tokens, list) and tokens else None
        n_vocab = vocab or _int_key(md, f"{arch}.vocab_size")
    if n_vocab <= 0:
        raise GGUFError(f"the vocabulary size must be positive, got {n_vocab}")
    scaling = md.get(f"{arch}.rope.scaling.type", "linear")
    factor = _float(md, "rope.scaling.factor", arch, 0.0, positive=False)
    if scaling not in ("none", "linear") and factor not in (0.0, 1.0):
        raise GGUFError(f"unsupported rope scaling type {scaling!r:.80}")
    rope_dims = _int(md, "rope.dimension_count", arch, head_dim)
    if arch == "llama" and rope_dims != head_dim:  # llama.cpp: "invalid n_rot"
        raise GGUFError(f"llama: rope.dimension_count {rope_dims} != head size {head_dim}")
    if rope_dims > head_dim or rope_dims % 2:  # RoPE turns pairs of a head's dims
        raise GGUFError(
            f"{arch}.rope.dimension_count {rope_dims} must be even and <= the head size {head_dim}"
        )
    eps = _float(md, "attention.layer_norm_rms_epsilon", arch)
    if eps >= 1.0:
        raise GGUFError(f"{arch}.attention.layer_norm_rms_epsilon {eps} is not below 1")
    c: dict[str, Any] = dict(
        arch=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=_int(md, "feed_forward_length", arch),
        n_vocab=int(n_vocab),
        n_ctx_train=_int(md, "context_length", arch),
        norm_eps=eps,
        rope_base=_float(md, "rope.freq_base", arch, 10000.0),
        rope_dims=rope_dims,
        rope_style=RopeStyle.NORM if arch == "llama" else RopeStyle.NEOX,
        rope_freq_scale=1.0 / factor if factor else 1.0,
    )
    if arch == "qwen2":
        c["qkv_bias"] = True
    elif arch == "qwen3":
        c["qk_norm"] = True
    elif arch == "gemma3":
        window = _int(md, "attention.sliding_window", arch, 0, lo=0)
        c.update(
            # models/gemma3.cpp scales Q by 1/sqrt(head_dim) before attention, by
            # 1/sqrt(n_embd / n_head) for the 62-layer 27B model
            attn_scale=1.0 / math.sqrt(n_embd / n_head if n_layer == 62 else head_dim),
            q_prescale=True,
            final_softcap=_float(md, "final_logit_softcapping", arch, 0.0, positive=False),
            qk_norm=True,
            post_norms=True,
            embd_scale=math.sqrt(n_embd),
            ffn_act="gelu_tanh",
        )
        if window > 0:
            pattern = md.get(f"{arch}.attention.sliding_window_pattern", 6)
            c.update(
                sliding_window=window,
                swa_layers=swa_pattern(n_layer, pattern),
                rope_base_swa=_float(md, "rope.freq_base_swa", arch, 10000.0),
            )
    return ModelConfig(**c)
