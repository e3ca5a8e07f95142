"""Stands for onnxruntime.capi.onnxruntime_inference_collection (same names, onnxexec)."""

from __future__ import annotations

from typing import Any

from onnxexec.capi._names import PUBLIC, lookup

__all__ = PUBLIC


def __getattr__(name: str) -> Any:
    return lookup(name, __name__)
