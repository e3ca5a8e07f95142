"""Stands for onnxruntime.capi._pybind_state: the same names, backed by onnxexec."""

from __future__ import annotations

from typing import Any

from onnxexec.capi._names import PUBLIC, lookup

__all__ = PUBLIC


def __getattr__(name: str) -> Any:
    return lookup(name, __name__)
