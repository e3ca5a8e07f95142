"""ONNX op handlers on numpy; one module per op family, registered in ops.registry.

Modules are imported on first registry lookup (see registry._ensure_loaded), so a
new family module needs no edit here.
"""

from __future__ import annotations

from onnxexec.ops.registry import Handler, op, resolve, versions

__all__ = ["Handler", "op", "resolve", "versions"]
