"""Plan-once executor and the onnxruntime-compatible session API."""

from __future__ import annotations

from typing import Any

# Names -> defining module, imported on first use: `onnxexec.runtime.executor` (the GGUF
# path) must not load the ONNX session and with it onnx.
_LAZY = {
    "ExecutionMode": "onnxexec.runtime.options",
    "GraphOptimizationLevel": "onnxexec.runtime.options",
    "ModelMetadata": "onnxexec.runtime.options",
    "NodeArg": "onnxexec.runtime.options",
    "RunOptions": "onnxexec.runtime.options",
    "SessionOptions": "onnxexec.runtime.options",
    "InferenceSession": "onnxexec.runtime.session",
    "get_all_providers": "onnxexec.runtime.session",
    "get_available_providers": "onnxexec.runtime.session",
    "get_device": "onnxexec.runtime.session",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'onnxexec.runtime' has no attribute '{name}'")


__all__ = [
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "RunOptions",
    "SessionOptions",
    "get_all_providers",
    "get_available_providers",
    "get_device",
]
