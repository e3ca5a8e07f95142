"""`onnxexec serve`: an OpenAI-compatible server with continuous batching (needs the
`serve` extra: fastapi, uvicorn, llguidance). `create_app(ServeConfig(...))` is the ASGI
app; `onnxexec serve MODEL.gguf` runs it with uvicorn."""

from __future__ import annotations

from typing import Any

_LAZY = {"ServeConfig": "onnxexec.serve.config", "create_app": "onnxexec.serve.app"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'onnxexec.serve' has no attribute '{name}'")


__all__ = list(_LAZY)
