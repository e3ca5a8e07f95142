"""A mutable working copy of a Graph for one pass: producer/consumer indexes,
constant lookup, node replacement, then `build()` back to a frozen Graph.

Matching happens against the indexes of the graph as it was when the editor was
made; a pass collects non-overlapping matches (`claim`) and applies them, so every
match stays valid. Fused nodes keep the output names of the node they replace, so
consumers need no rewiring and the graph interface never changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

import numpy as np

from onnxexec.ir.graph import Graph, Node, ValueInfo


def rebuild(
    g: Graph,
    nodes: Iterable[Node],
    initializers: dict[str, Any] | None = None,
    value_info: dict[str, ValueInfo] | None = None,
    opset_imports: dict[str, int] | None = None,
) -> Graph:
    """`g` with new nodes (and optionally initializers / value_info / opsets)."""
    return Graph(
        nodes=tuple(nodes),
        inputs=g.inputs,
        outputs=g.outputs,
        initializers=g.initializers if initializers is None else initializers,
        value_info=g.value_info if value_info is None else value_info,
        opset_imports=g.opset_imports if opset_imports is None else opset_imports,
        functions=g.functions,
        name=g.name,
        metadata=g.metadata,
    )


class GraphEditor:
    """Indexes over `g` plus the pending edits of one pass."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.nodes: list[Node] = list(g.nodes)
        self.inits: dict[str, Any] = dict(g.initializers)
        self.graph_inputs = {v.name for v in g.inputs}
        self.graph_outputs = {v.name for v in g.outputs}
        self._replacements: dict[int, list[Node]] = {}
        self._removed: set[int] = set()
        self._claimed: set[int] = set()
        self._extra_opsets: dict[str, int] = {}
        self._alias: dict[str, str] = {}
        self.changed = False

    # ----- indexes -------------------------------------------------------------
    # Built on first use, once per editor (each O(nodes)): a session makes ~20 editors
    # and many passes find nothing to match, so they never need the name set.
    @cached_property
    def producer(self) -> dict[str, int]:
        """Value name -> index of the node that writes it."""
        producer: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            for o in n.outputs:
                if o:
                    producer[o] = i
        return producer

    @cached_property
    def _uses(self) -> tuple[dict[str, list[int]], set[str]]:
        users: dict[str, list[int]] = {}
        subgraph_reads: set[str] = set()
        for i, n in enumerate(self.nodes):
            for name in n.inputs:
                if name:
                    users.setdefault(name, []).append(i)
            for sg in n.subgraphs():
                for name in sg.free_names():
                    users.setdefault(name, []).append(i)
                    subgraph_reads.add(name)
        return users, subgraph_reads

    @property
    def users(self) -> dict[str, list[int]]:
        """Value name -> indexes of the nodes reading it (once per input slot; a node
        whose nested graphs read it counts once more)."""
        return self._uses[0]

    @property
    def subgraph_reads(self) -> set[str]:
        """Names nested graphs read from this scope."""
        return self._uses[1]

    @cached_property
    def _names(self) -> set[str]:
        return self.g.defined_names() | set(self.g.value_info)

    # ----- queries -------------------------------------------------------------
    def const(self, name: str) -> np.ndarray | None:
        """The constant value of `name` (a non-overridable initializer), else None."""
        if not name or name in self.graph_inputs:
            return None
        v = self.inits.get(name)
        return v if isinstance(v, np.ndarray) else None

    def scalar(self, name: str) -> float | None:
        """A constant holding one number (any shape of size 1) as a float, else None."""
        v = self.const(name)
        if v is None or v.size != 1 or v.dtype.kind not in "fiub":
            return None
        return float(v.reshape(-1)[0])

    def index(self, n: Node) -> int:
        return self.producer[next(o for o in n.outputs if o)]

    def node_of(self, name: str) -> Node | None:
        i = self.producer.get(name)
        return None if i is None else self.nodes[i]

    def producer_op(self, name: str, *op_types: str, domain: str = "") -> Node | None:
        """The node producing `name` when its type is one of `op_types`, else None."""
        n = self.node_of(name)
        if n is None or n.domain != domain or n.op_type not in op_types:
            return None
        return n

    def consumers(self, name: str) -> list[Node]:
        return [self.nodes[i] for i in dict.fromkeys(self.users.get(name, ()))]

    def n_uses(self, name: str) -> int:
        """Reads of `name` by nodes (each input slot counts) plus one if a graph output."""
        return len(self.users.get(name, ())) + (name in self.graph_outputs)

    def single_use(self, name: str) -> bool:
        return self.n_uses(name) == 1

    def private(self, nodes: Iterable[Node], anchor: Node) -> bool:
        """True when every value the pattern `nodes` computes, except `anchor`'s outputs,
        is read only inside the pattern (so removing the pattern loses nothing)."""
        members = {self.index(n) for n in nodes}
        for n in nodes:
            if n is anchor:
                continue
            for o in n.outputs:
                if not o:
                    continue
                if o in self.graph_outputs:
                    return False
                if any(u not in members for u in self.users.get(o, ())):
                    return False
        return True

    # ----- edits ---------------------------------------------------------------
    def claim(self, nodes: Iterable[Node]) -> bool:
        """Reserve the nodes of a match; False if one already belongs to another match."""
        idx = {self.index(n) for n in nodes}
        if idx & self._claimed:
            return False
        self._claimed |= idx
        return True

    def replace(self, pattern: Iterable[Node], anchor: Node, new: Node | list[Node]) -> None:
        """Drop the `pattern` nodes and put `new` where `anchor` was (topologically safe:
        the anchor is the pattern's last node, so every outside input exists before it)."""
        a = self.index(anchor)
        for n in pattern:
            i = self.index(n)
            if i != a:
                self._removed.add(i)
        self._replacements[a] = new if isinstance(new, list) else [new]
        self.changed = True

    def edited(self, i: int) -> bool:
        """Whether node index `i` is already removed or replaced in this pass."""
        return i in self._removed or i in self._replacements

    def remove(self, n: Node) -> None:
        self._removed.add(self.index(n))
        self.changed = True

    def fresh(self, hint: str) -> str:
        """A value name not used anywhere in the graph."""
        name, k = hint, 0
        while name in self._names:
            k += 1
            name = f"{hint}_{k}"
        self._names.add(name)
        return name

    def add_const(self, hint: str, value: np.ndarray) -> str:
        name = self.fresh(hint)
        self.inits[name] = value
        self.changed = True
        return name

    def can_alias(self, old: str) -> bool:
        """Whether readers of `old` may be redirected: not a graph output, not read by a
        nested graph (whose free names we do not rewrite)."""
        return old not in self.graph_outputs and old not in self.subgraph_reads

    def alias(self, old: str, new: str) -> None:
        """Make every node that reads `old` read `new` instead (see can_alias)."""
        self._alias[old] = new
        self.changed = True

    def _resolve(self, name: str) -> str:
        """The end of `name`'s alias chain. Path compression keeps a chain of 20k
        removed Identity nodes linear (a step cap here once cut long chains short)."""
        path: list[str] = []
        while name in self._alias:
            path.append(name)
            name = self._alias[name]
            if len(path) > len(self._alias):
                raise RuntimeError(f"alias cycle through '{name}'")
        for p in path:
            self._alias[p] = name
        return name

    def use_domain(self, domain: str, version: int = 1) -> None:
        self._extra_opsets[domain] = version

    def build(self) -> Graph:
        nodes: list[Node] = []
        for i, n in enumerate(self.nodes):
            if i in self._replacements:
                nodes.extend(self._replacements[i])
            elif i not in self._removed:
                nodes.append(n)
        if self._alias:
            nodes = [self._renamed(n) for n in nodes]
        opsets = dict(self.g.opset_imports)
        for d, v in self._extra_opsets.items():
            opsets.setdefault(d, v)
        return rebuild(self.g, nodes, self.inits, opset_imports=opsets)

    def _renamed(self, n: Node) -> Node:
        ins = tuple(self._resolve(i) if i else i for i in n.inputs)
        if ins == n.inputs:
            return n
        return Node(n.op_type, ins, n.outputs, n.attrs, n.name, n.domain)


def same_value(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Two constants with the same dtype, shape and bytes."""
    if a is None or b is None:
        return False
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
