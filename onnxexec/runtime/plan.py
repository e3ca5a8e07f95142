"""Plan a graph once: toposort, resolve every handler, bind attributes, number the
values into slots, and record after which step each slot can be dropped.

Subgraphs (If/Loop/Scan bodies) are planned here too, recursively, with the names
they read from enclosing scopes as extra ("implicit") inputs of their node, so the
last-use bookkeeping keeps those values alive long enough.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from onnxexec.errors import InvalidGraphError, UnsupportedOpError
from onnxexec.ir.graph import Graph, Node, ValueInfo
from onnxexec.ir.types import TensorType
from onnxexec.ops.registry import Handler, resolve, versions
from onnxexec.passes.inline_functions import inline_functions
from onnxexec.passes.lower_gradient import lower_gradient

log = logging.getLogger("onnxexec")

_SCHEMA_DOMAINS = frozenset({"", "ai.onnx.ml", "ai.onnx.preview.training"})

# Domains a model may use without importing them (onnxexec's own ops, from GGUF).
_DEFAULT_OPSETS = {"onnxexec": 1}


@dataclass
class Step:
    """One prepared node: call `fn(*vals[ins], **kwargs)`, store into `outs`."""

    node: Node
    handler: Handler
    opset: int
    ins: tuple[int, ...]  # -1 = omitted optional input
    outs: tuple[int, ...]  # -1 = omitted output
    kwargs: dict[str, Any]
    free: tuple[int, ...] = ()  # slots dead after this step
    implicit: tuple[tuple[str, int], ...] = ()  # outer-scope names its subgraphs read
    subplans: dict[int, GraphPlan] = field(default_factory=dict)  # id(Graph) -> plan
    # schedule.py's compiled subgraph bodies (id(Graph) -> Body), built on first run
    bodies: dict[int, Any] | None = field(default=None, repr=False)

    @property
    def fn(self) -> Callable[..., Any]:
        return self.handler.fn


@dataclass
class GraphPlan:
    graph: Graph
    n_slots: int
    template: list[Any]  # constants pre-placed, everything else None
    input_slots: dict[str, int]
    outer_slots: dict[str, int]
    output_slots: tuple[int, ...]
    output_names: tuple[str, ...]
    steps: list[Step]
    slot_names: list[str]
    schedule: list[tuple[Any, ...]] | None = field(default=None, repr=False)  # schedule.py


def _toposort(g: Graph, visible: set[str]) -> list[Node]:
    """Nodes in dependency order (ONNX requires it, but some exporters don't honour it).

    Linear (Kahn's algorithm keyed by value name); a graph already in order comes back
    in the same order, and a node becomes ready right after its last missing input."""
    known = set(visible) | {v.name for v in g.inputs} | set(g.initializers)
    nodes = g.nodes
    lacking: list[set[str]] = []
    waiting: dict[str, list[int]] = {}  # value name -> nodes that still need it
    ordered: list[Node] = []

    def emit(k: int) -> None:
        ready = [k]
        while ready:
            n = nodes[ready.pop()]
            ordered.append(n)
            for o in n.outputs:
                if o and o not in known:
                    known.add(o)
                    for w in waiting.pop(o, ()):
                        lacking[w].discard(o)
                        if not lacking[w]:
                            ready.append(w)

    for k, n in enumerate(nodes):
        needs = {i for i in n.inputs if i}
        for sg in n.subgraphs():
            needs |= sg.free_names()
        miss = needs - known
        lacking.append(miss)
        for name in miss:
            waiting.setdefault(name, []).append(k)
        if not miss:
            emit(k)
    if len(ordered) < len(nodes):
        k = next(k for k, m in enumerate(lacking) if m)
        n = nodes[k]
        raise InvalidGraphError(
            f"node '{n.label}' ({n.op_type}) reads undefined value(s) {sorted(lacking[k])} "
            "(or the graph has a cycle)"
        )
    return ordered


def topologically_sorted(g: Graph) -> Graph:
    """`g` itself when its nodes are in dependency order, else `g` with them sorted.

    The optimizer's passes walk nodes in list order (dead-node elimination from the
    end), so an unsorted model has to be sorted before them, as onnxruntime does."""
    order = _toposort(g, set())
    if all(a is b for a, b in zip(order, g.nodes, strict=True)):
        return g
    return replace(g, nodes=tuple(order))


def _outer_info(name: str, parent: Graph, facts: dict[str, Any]) -> ValueInfo:
    """An outer value as a body input: its declared type, else the one inferred in the
    parent (the fusions key on element types, e.g. float32 elementwise chains)."""
    declared = parent.value_info.get(name) or next(
        (v for v in parent.inputs if v.name == name), None
    )
    if declared is not None and declared.type is not None:
        return declared
    f = facts.get(name)
    if f is None or f.elem is None:
        return ValueInfo(name)
    shape = None if f.shape is None else tuple(d if type(d) is int else None for d in f.shape)
    return ValueInfo(name, TensorType(f.elem, shape))


def _optimized_body(
    sg: Graph, parent: Graph, outer: set[str], level: int, functions: dict, facts: dict
) -> Graph:
    """`sg` through the session's pass pipeline, the outer-scope values it reads
    declared as extra inputs (so no pass folds, renames or drops them), then removed
    again. `sg` itself when nothing changed or the result does not keep its interface."""
    if level <= 0 or not sg.nodes:
        return sg
    from onnxexec.passes import optimize

    extra = tuple(_outer_info(name, parent, facts) for name in sorted(outer))
    n_in = len(sg.inputs)
    try:
        opt = optimize(replace(sg, inputs=(*sg.inputs, *extra), functions=functions), level)
    except Exception:  # as pipeline.py: an optimizer bug must not stop the model
        log.warning("optimizing subgraph '%s' failed; planned as loaded", sg.name, exc_info=True)
        return sg
    if opt is sg or [v.name for v in opt.inputs] != [v.name for v in (*sg.inputs, *extra)]:
        return sg
    opt = replace(opt, inputs=opt.inputs[:n_in])
    # the interface must survive: same outputs, no new outer-scope reads
    if [v.name for v in opt.outputs] != [v.name for v in sg.outputs]:
        return sg
    if not opt.free_names() <= sg.free_names():
        return sg
    return opt


def _facts(g: Graph, level: int) -> dict[str, Any]:
    if level <= 0:
        return {}
    from onnxexec.passes.shape_inference import infer_shapes

    try:
        return infer_shapes(g)
    except Exception:  # types only help the fusions; a body plans without them
        log.debug("shape inference failed on '%s'", g.name, exc_info=True)
        return {}


class _Planner:
    def __init__(self, functions: dict, level: int = 0) -> None:
        self.functions = functions
        self.level = level
        self.unsupported: dict[tuple[str, str, int], list[str]] = {}
        self.problems: list[str] = []

    def handler_for(self, node: Node, g: Graph) -> tuple[Handler | None, int]:
        opset = g.opset(node.domain)
        if opset is None:
            opset = _DEFAULT_OPSETS.get(node.domain)
        if opset is None:
            self.problems.append(
                f"node '{node.label}' ({node.op_type}) uses domain '{node.domain}' "
                "which the model does not import"
            )
            return None, 0
        h = resolve(node.domain, node.op_type, opset)
        if h is None:
            self.unsupported.setdefault((node.domain, node.op_type, opset), []).append(node.label)
        return h, opset

    def bind(self, node: Node, h: Handler) -> dict[str, Any]:
        # onnx-schema domains had their arity checked by validate.py; the others
        # (com.microsoft...) are checked against the handler's signature
        n_in = len(node.inputs)
        if node.domain not in _SCHEMA_DOMAINS and h.max_inputs is not None and n_in > h.max_inputs:
            self.problems.append(
                f"node '{node.label}' ({h.qualname}): {n_in} inputs, the op takes at most "
                f"{h.max_inputs}"
            )
        kwargs = {}
        for k, v in node.attrs.items():
            if k in h.attributes or h.accepts_any_attribute:
                kwargs[k] = v
            else:
                self.problems.append(f"node '{node.label}' ({h.qualname}): unknown attribute '{k}'")
        missing = h.required_attributes - set(kwargs)
        if missing:
            self.problems.append(
                f"node '{node.label}' ({h.qualname}): missing required "
                f"attribute(s) {sorted(missing)}"
            )
        return kwargs

    def prepare(self, node: Node, h: Handler, g: Graph, attrs: dict[str, Any]) -> Any:
        """The node's prepared state (ops/registry.py): made once here, kept by the step."""
        assert h.prepare is not None
        consts = tuple(g.initializers.get(i) if i else None for i in node.inputs)
        try:
            return h.prepare(consts, dict(attrs))
        except (ValueError, TypeError) as e:
            self.problems.append(f"node '{node.label}' ({h.qualname}): {e}")
            return None

    def plan(self, g: Graph, outer: tuple[str, ...] = ()) -> GraphPlan:
        g = lower_gradient(inline_functions(g, self.functions))
        slots: dict[str, int] = {}
        names: list[str] = []

        def slot(name: str) -> int:
            if name not in slots:
                slots[name] = len(names)
                names.append(name)
            return slots[name]

        outer_slots = {n: slot(n) for n in outer}
        # Graph inputs shadow outer names and initializers back default-valued inputs.
        input_slots = {v.name: slot(v.name) for v in g.inputs}
        const_slots = {k: slot(k) for k in g.initializers}
        visible = set(outer) | set(input_slots) | set(const_slots)
        nodes = _toposort(g, visible)
        steps: list[Step] = []
        facts: dict[str, Any] | None = None  # the parent's inferred types, for bodies
        for n in nodes:
            h, opset = self.handler_for(n, g)
            ins = tuple(slot(i) if i else -1 for i in n.inputs)
            outs = tuple(slot(o) if o else -1 for o in n.outputs)
            if h is None:
                continue
            kwargs = self.bind(n, h)
            if h.prepare is not None:
                kwargs["prepared"] = self.prepare(n, h, g, kwargs)
            step = Step(n, h, opset, ins, outs, kwargs)
            free: set[str] = set()
            for sg in n.subgraphs():
                sg_free = sg.free_names() & visible
                if facts is None:
                    facts = _facts(g, self.level)
                body = _optimized_body(sg, g, sg_free, self.level, self.functions, facts)
                if body is not sg:
                    sg_free = body.free_names() & visible
                # keyed by the attribute the handler passes to run_graph
                step.subplans[id(sg)] = self.plan(body, tuple(sorted(sg_free)))
                free |= sg_free
            step.implicit = tuple((name, slots[name]) for name in sorted(free) if name in slots)
            if "num_outputs" in h.wants:
                kwargs["num_outputs"] = len(n.outputs)
            if "opset" in h.wants:
                kwargs["opset"] = opset
            steps.append(step)
            visible.update(o for o in n.outputs if o)

        out_names = tuple(v.name for v in g.outputs)
        for name in out_names:
            if name not in slots or (name not in visible):
                self.problems.append(f"graph '{g.name}': output '{name}' is never produced")
        out_slots = tuple(slots.get(name, -1) for name in out_names)
        template: list[Any] = [None] * len(names)
        for k, s in const_slots.items():
            template[s] = g.initializers[k]
        _assign_frees(steps, set(out_slots) | set(const_slots.values()), len(names))
        _mark_used_outputs(steps, set(out_slots))
        return GraphPlan(
            g, len(names), template, input_slots, outer_slots, out_slots, out_names, steps, names
        )


def _assign_frees(steps: list[Step], keep: set[int], n_slots: int) -> None:
    last: dict[int, int] = {}
    for i, st in enumerate(steps):
        for s in st.ins:
            if s >= 0:
                last[s] = i
        for _, s in st.implicit:
            last[s] = i
        for s in st.outs:
            if s >= 0:
                last.setdefault(s, i)  # never read: drop right after it is made
    per_step: list[list[int]] = [[] for _ in steps]
    for s, i in last.items():
        if s not in keep:
            per_step[i].append(s)
    for st, fr in zip(steps, per_step, strict=True):
        st.free = tuple(fr)


def _mark_used_outputs(steps: list[Step], graph_outs: set[int]) -> None:
    read: set[int] = set(graph_outs)
    for st in steps:
        read.update(s for s in st.ins if s >= 0)
        read.update(s for _, s in st.implicit)
    for st in steps:
        if "outputs_used" in st.handler.wants:
            st.kwargs["outputs_used"] = tuple(s >= 0 and s in read for s in st.outs)


def plan_graph(g: Graph, level: int = 0) -> GraphPlan:
    """Plan the top-level graph; one UnsupportedOpError lists every missing handler.

    `level`: the session's optimization level, applied to If/Loop/Scan bodies here
    (the caller optimized `g` itself), so each body is optimized and planned once."""
    p = _Planner(dict(g.functions), level)
    plan = p.plan(g)
    if p.unsupported:
        lines = []
        for (dom, op_type, opset), nodes in sorted(p.unsupported.items()):
            have = versions(dom, op_type)
            where = ", ".join(repr(n) for n in nodes[:3]) + (" ..." if len(nodes) > 3 else "")
            d = dom or "ai.onnx"
            avail = f"handlers exist for opsets {have}" if have else "no handler at any opset"
            lines.append(f"{d}::{op_type} at opset {opset} ({avail}; nodes {where})")
        raise UnsupportedOpError(f"{len(lines)} unsupported op(s): " + "; ".join(lines))
    if p.problems:
        raise InvalidGraphError("; ".join(p.problems))
    return plan
