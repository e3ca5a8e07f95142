"""onnxexec: run and understand ONNX and GGUF models from Python.

`onnxexec.InferenceSession` is a drop-in for onnxruntime's.
"""

from __future__ import annotations

from onnxexec.errors import (
    InvalidFeedError,
    InvalidGraphError,
    ModelLoadError,
    NodeExecutionError,
    OnnxExecError,
    UnsupportedOpError,
)
from onnxexec.runtime import (
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
    get_all_providers,
    get_available_providers,
    get_device,
)

__version__ = "0.1.0"

__all__ = [
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidFeedError",
    "InvalidGraphError",
    "ModelLoadError",
    "ModelMetadata",
    "NodeArg",
    "NodeExecutionError",
    "OnnxExecError",
    "RunOptions",
    "SessionOptions",
    "UnsupportedOpError",
    "__version__",
    "get_all_providers",
    "get_available_providers",
    "get_device",
]
