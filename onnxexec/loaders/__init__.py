"""Loaders turn model files into onnxexec.ir graphs (and do nothing else)."""

from __future__ import annotations

from typing import Any

__all__ = ["load_onnx"]


def __getattr__(name: str) -> Any:
    # lazy: the GGUF loader (loaders.gguf_reader) must not import onnx with this package
    if name == "load_onnx":
        from onnxexec.loaders.onnx_proto import load_onnx

        return load_onnx
    raise AttributeError(f"module 'onnxexec.loaders' has no attribute '{name}'")
