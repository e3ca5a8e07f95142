"""Checks of a GGUF LLM's tensors against its config, run before any weight is prepared.

A file whose metadata and tensors disagree (a halved attention matrix, a zero-length
row, a block count far above the layers present) would otherwise load and compute
garbage, or loop and allocate by the metadata's numbers. The expected shapes follow
llama.cpp's create_tensor calls (src/llama-model.cpp) for the supported archs; like
llama.cpp, a shape must match exactly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from onnxexec.errors import GGUFError
from onnxexec.kernels.quant.dequant import SUPPORTED_TYPES
from onnxexec.llm.config import ModelConfig
from onnxexec.loaders.gguf_reader import GGUFTensor

_BLOCK = re.compile(r"blk\.(\d+)\.")


def expected_shapes(c: ModelConfig) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Tensor name -> (numpy shape, required) for every tensor the graph may read."""
    qd, kvd, d = c.n_head * c.head_dim, c.n_head_kv * c.head_dim, c.n_embd
    out: dict[str, tuple[tuple[int, ...], bool]] = {
        "token_embd.weight": ((c.n_vocab, d), True),
        "output_norm.weight": ((d,), True),
        "output.weight": ((c.n_vocab, d), False),  # absent: tied to token_embd
    }
    gemma = c.post_norms
    for il in range(c.n_layer):
        p = f"blk.{il}"
        layer = {
            "attn_norm.weight": ((d,), True),
            "attn_q.weight": ((qd, d), True),
            "attn_k.weight": ((kvd, d), True),
            "attn_v.weight": ((kvd, d), True),
            # the graph adds these biases whenever present, so their shape matters too
            "attn_q.bias": ((qd,), c.qkv_bias),
            "attn_k.bias": ((kvd,), c.qkv_bias),
            "attn_v.bias": ((kvd,), c.qkv_bias),
            "attn_output.weight": ((d, qd), True),
            "ffn_norm.weight": ((d,), True),
            "ffn_gate.weight": ((c.n_ff, d), True),
            "ffn_up.weight": ((c.n_ff, d), True),
            "ffn_down.weight": ((d, c.n_ff), True),
        }
        if c.qk_norm:
            layer["attn_q_norm.weight"] = ((c.head_dim,), True)
            layer["attn_k_norm.weight"] = ((c.head_dim,), True)
        if gemma:
            layer["post_attention_norm.weight"] = ((d,), True)
            layer["post_ffw_norm.weight"] = ((d,), True)
        out.update({f"{p}.{k}": v for k, v in layer.items()})
    return out


def check_layer_count(c: ModelConfig, tensors: Mapping[str, GGUFTensor], path: str) -> None:
    """block_count must match the layers the file has tensors for (checked before any
    per-layer loop, so a huge block_count fails at once)."""
    present = {int(m.group(1)) for name in tensors if (m := _BLOCK.match(name))}
    missing = next(
        (il for il in range(min(c.n_layer, len(present) + 1)) if il not in present), None
    )
    if c.n_layer > len(present) or missing is not None:
        raise GGUFError(
            f"{path}: {c.arch}.block_count is {c.n_layer} but the file has tensors for "
            f"{len(present)} layers"
            + (f" (none for layer {missing})" if missing is not None else "")
        )
    extra = max(present, default=-1)
    if extra >= c.n_layer:
        raise GGUFError(f"{path}: tensor for layer {extra} but {c.arch}.block_count is {c.n_layer}")


def check_tensors(
    c: ModelConfig, tensors: Mapping[str, GGUFTensor], path: str | os.PathLike
) -> None:
    """GGUFError naming the tensor when one is missing, has the wrong shape or a ggml
    type without a kernel; also the vocabulary size vs token_embd rows."""
    p = str(path)
    check_layer_count(c, tensors, p)
    for name, (shape, required) in expected_shapes(c).items():
        t = tensors.get(name)
        if t is None:
            if required:
                raise GGUFError(f"{p}: GGUF file has no tensor '{name}' ({c.arch} needs it)")
            continue
        if t.shape != shape:
            raise GGUFError(
                f"{p}: tensor '{name}' has shape {list(t.shape)}, {c.arch} with this "
                f"metadata needs {list(shape)}"
            )
        if int(t.ggml_type) not in SUPPORTED_TYPES:
            raise GGUFError(
                f"{p}: tensor '{name}' has ggml type {t.ggml_type.name}, which onnxexec "
                "cannot compute with"
            )
