"""GGUF language models: tokenizer, model, generation."""

from __future__ import annotations

from typing import Any

from onnxexec.llm.tokenizer import StreamDecoder, Tokenizer, load_tokenizer

# The model side pulls in the numba kernels: imported on first use, so that
# `from onnxexec.llm import load_tokenizer` stays light.
# No submodule may be named after a name exported here: importing it would bind the
# package attribute to the module (generate and perplexity live in generation.py
# and evaluation.py for that reason).
_LAZY = {
    "LLM": "onnxexec.llm.model",
    "GraphOptions": "onnxexec.llm.graph",
    "ModelConfig": "onnxexec.llm.config",
    "GenerationResult": "onnxexec.llm.generation",
    "generate": "onnxexec.llm.generation",
    "stream": "onnxexec.llm.generation",
    "SamplingParams": "onnxexec.llm.sampler",
    "perplexity": "onnxexec.llm.evaluation",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'onnxexec.llm' has no attribute '{name}'")


__all__ = ["StreamDecoder", "Tokenizer", "load_tokenizer", *_LAZY]
