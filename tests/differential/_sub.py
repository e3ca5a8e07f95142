"""A random subgraph: its nodes, inputs with their feeds, and what the optimizer must
(not) do to it. Many subgraphs share one model (one session per level for all)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from onnx import NodeProto, helper

node = helper.make_node
EXACT = (0.0, 0.0)  # bit-equal


@dataclass
class Sub:
    """One subgraph; every value it names starts with `prefix`."""

    family: str
    prefix: str
    nodes: list[NodeProto] = field(default_factory=list)
    inputs: list[tuple[str, list[Any], np.ndarray]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    tol: tuple[float, float] = EXACT  # (rtol, atol) against level 0
    must: set[str] = field(default_factory=set)  # fused ops at levels >= 2
    must_not: set[str] = field(default_factory=set)
    opset: int = 17  # the model's opset (ReduceMean takes axes as an input from 18)

    def name(self, s: str) -> str:
        return f"{self.prefix}{s}"

    def const(self, s: str, v: np.ndarray) -> str:
        self.inits[self.name(s)] = np.asarray(v, dtype=np.float32)
        return self.name(s)

    def const_i64(self, s: str, v: list[int]) -> str:
        self.inits[self.name(s)] = np.asarray(v, dtype=np.int64)
        return self.name(s)

    def input(self, s: str, value: np.ndarray, data: st.DataObject | None = None) -> str:
        """A graph input fed `value`; declared with symbolic dims sometimes (given data)."""
        name = self.name(s)
        shape = list(value.shape) if data is None else declared(data, value.shape, name)
        self.inputs.append((name, shape, value.astype(np.float32)))
        return name

    def add(self, op: str, ins: list[str], out: str, **attrs: Any) -> str:
        self.nodes.append(node(op, ins, [self.name(out)], **attrs))
        return self.name(out)


def values(data: st.DataObject, shape: tuple[int, ...], special: bool = True) -> np.ndarray:
    """Normal float32 values, sometimes with NaN / inf / huge / tiny entries mixed in."""
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape).astype(np.float32) * np.float32(
        data.draw(st.sampled_from([1.0, 1.0, 1.0, 0.01, 100.0]), label="scale")
    )
    if special and v.size and data.draw(st.integers(0, 9), label="specials") == 0:
        k = data.draw(st.integers(1, min(3, v.size)), label="n_special")
        pos = rng.choice(v.size, size=k, replace=False)
        pool = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e20, 1e-40, 0.0], np.float32)
        v.reshape(-1)[pos] = pool[rng.integers(0, pool.size, size=k)]
    return v


def declared(data: st.DataObject, shape: tuple[int, ...], tag: str) -> list[Any]:
    """An input's declared shape: static, or some dims symbolic, named after the input
    (shape inference must carry the symbols through the fused ops)."""
    if not shape or data.draw(st.booleans(), label="symbolic"):
        return list(shape)
    return [
        d if data.draw(st.booleans(), label="sym") else f"{tag}_{i}" for i, d in enumerate(shape)
    ]
