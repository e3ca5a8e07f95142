"""onnxexec: run and understand ONNX and GGUF models from Python.

`onnxexec.InferenceSession` is a drop-in for onnxruntime's.
"""

from __future__ import annotations

from typing import Any

from onnxexec.errors import (
    InvalidFeedError,
    InvalidGraphError,
    ModelLoadError,
    NodeExecutionError,
    OnnxExecError,
    UnsupportedOpError,
)
from onnxexec.runtime import __all__ as _RUNTIME_NAMES

# The session API loads onnx and numba (over a second): imported on first use, so that
# the GGUF path (`onnxexec generate`, `onnxexec.llm`) never pays for onnx.

__version__ = "0.1.0"

__all__ = [
    "InvalidFeedError",
    "InvalidGraphError",
    "ModelLoadError",
    "NodeExecutionError",
    "OnnxExecError",
    "UnsupportedOpError",
    "__version__",
    *_RUNTIME_NAMES,
]


def __getattr__(name: str) -> Any:
    if name in _RUNTIME_NAMES:
        import onnxexec.runtime

        return getattr(onnxexec.runtime, name)
    raise AttributeError(f"module 'onnxexec' has no attribute '{name}'")
