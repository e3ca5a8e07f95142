"""The internal op graph shared by every loader and the executor."""

from __future__ import annotations

from onnxexec.ir.graph import Function, Graph, Node, ValueInfo, canonical_domain
from onnxexec.ir.types import MapType, OptionalType, SequenceType, TensorType, ValueType

__all__ = [
    "Function",
    "Graph",
    "MapType",
    "Node",
    "OptionalType",
    "SequenceType",
    "TensorType",
    "ValueInfo",
    "ValueType",
    "canonical_domain",
]
