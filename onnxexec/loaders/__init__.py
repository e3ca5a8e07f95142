"""Loaders turn model files into onnxexec.ir graphs (and do nothing else)."""

from __future__ import annotations

from onnxexec.loaders.onnx_proto import load_onnx

__all__ = ["load_onnx"]
