"""Plan-once executor and the onnxruntime-compatible session API."""

from __future__ import annotations

from onnxexec.runtime.options import (
    ExecutionMode,
    GraphOptimizationLevel,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
)
from onnxexec.runtime.session import (
    InferenceSession,
    get_all_providers,
    get_available_providers,
    get_device,
)

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
