"""The one internal op graph: both the ONNX and the GGUF loaders produce it.

Frozen dataclasses: passes build new graphs instead of mutating. Node attributes
are already Python values (int, float, str, bytes, tuples, ndarray, Graph, types).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from onnxexec.ir.types import ValueType

ONNX_DOMAIN = ""
ML_DOMAIN = "ai.onnx.ml"
ONNXEXEC_DOMAIN = "onnxexec"


def canonical_domain(domain: str) -> str:
    """'ai.onnx' and '' name the same default domain."""
    return "" if domain in ("", "ai.onnx") else domain


def _frozen(m: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True)
class ValueInfo:
    """A named graph input/output/intermediate and its declared type (None = unknown)."""

    name: str
    type: ValueType | None = None
    doc: str = ""


@dataclass(frozen=True)
class Node:
    """One op application. An empty string in `inputs`/`outputs` is an omitted optional."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = ONNX_DOMAIN

    def __post_init__(self) -> None:
        object.__setattr__(self, "domain", canonical_domain(self.domain))
        object.__setattr__(self, "attrs", _frozen(self.attrs))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        # Every pass and the planner ask each node for its subgraphs, often per walk:
        # collect them once (attrs are frozen), not per call.
        subs: list[Graph] = []
        for v in self.attrs.values():
            if isinstance(v, Graph):
                subs.append(v)
            elif isinstance(v, tuple) and v and isinstance(v[0], Graph):
                subs.extend(v)
        object.__setattr__(self, "_subgraphs", tuple(subs))

    @property
    def label(self) -> str:
        """Name for messages: the node name, or its first output when unnamed."""
        return self.name or (self.outputs[0] if self.outputs else self.op_type)

    def subgraphs(self) -> tuple[Graph, ...]:
        """Graph-valued attributes (GRAPH and GRAPHS), in attribute order."""
        return self._subgraphs  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Function:
    """A model-local function (FunctionProto): a node body with formal parameters."""

    name: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[str, ...]
    attribute_defaults: Mapping[str, Any]
    nodes: tuple[Node, ...]
    opset_imports: Mapping[str, int]
    overload: str = ""


@dataclass(frozen=True)
class Graph:
    """A (sub)graph: nodes in topological order plus its typed interface.

    `initializers` maps names to arrays (possibly memory-mapped, never copied at
    load). `opset_imports` is per canonical domain; subgraphs carry their parent's.
    """

    nodes: tuple[Node, ...]
    inputs: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]
    initializers: Mapping[str, Any] = field(default_factory=dict)
    value_info: Mapping[str, ValueInfo] = field(default_factory=dict)
    opset_imports: Mapping[str, int] = field(default_factory=dict)
    functions: Mapping[tuple[str, str], Function] = field(default_factory=dict)
    name: str = "graph"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        for name in ("initializers", "value_info", "opset_imports", "functions", "metadata"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    # Identity semantics: graphs are attribute values and keys of per-graph plans;
    # structural equality over arrays would be both slow and ill-defined.
    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def opset(self, domain: str) -> int | None:
        return self.opset_imports.get(canonical_domain(domain))

    def runtime_inputs(self) -> tuple[ValueInfo, ...]:
        """Inputs a caller must (or may) feed: those without an initializer of the same name."""
        return tuple(v for v in self.inputs if v.name not in self.initializers)

    def defined_names(self) -> set[str]:
        names = {v.name for v in self.inputs} | set(self.initializers)
        for n in self.nodes:
            names.update(o for o in n.outputs if o)
        return names

    def free_names(self) -> set[str]:
        """Names used here or in nested subgraphs but defined in an enclosing scope."""
        defined = self.defined_names()
        used: set[str] = set()
        for n in self.nodes:
            used.update(i for i in n.inputs if i)
            for g in n.subgraphs():
                used |= g.free_names()
        used.update(v.name for v in self.outputs)
        return used - defined

    def parameter_count(self) -> tuple[int, int]:
        """(number of elements, bytes) over all initializers that are arrays."""
        count = nbytes = 0
        for v in self.initializers.values():
            if isinstance(v, np.ndarray):
                count += v.size
                nbytes += v.nbytes
        return count, nbytes
