"""Reject invalid models at session creation, as strictly as onnxruntime does at load.

Checked here, before any pass or kernel sees the graph (so both may trust it):
- opset imports onnx does not know (ai.onnx 1000);
- every name defined once: graph inputs, initializers-as-values and node outputs
  (duplicate inputs, two writers of one value, a node writing a graph input);
- per node, against onnx.defs: input/output arity, empty names where the formal
  parameter is not optional, and type constraints with each type variable bound
  across inputs (Add(float, double), Relu(bool), If(float cond));
- attribute ranges kernels rely on (ops/attr_rules.py): conv / pool kernel_shape,
  strides, dilations > 0, pads >= 0 and of length 2 x spatial rank;
- shape consistency that is known before running: Conv / ConvTranspose weight vs input
  channels, group and bias; BatchNormalization parameters vs channels;
- control flow: If branches with as many outputs as the node, Loop / Scan bodies of
  the arity their node implies; subgraphs are checked recursively;
- then onnx's strict type and shape inference on the model's bytes, as onnxruntime
  runs it per node (validate_onnx.py): Reshape, Gather, Transpose, MatMul... errors.

Element types come from shape inference (passes/shape_inference.py); a value whose
type is not known is not checked, so no valid model is refused for what we cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from onnxexec.errors import InvalidGraphError
from onnxexec.ir.dtypes import type_name
from onnxexec.ir.graph import ML_DOMAIN, ONNX_DOMAIN, Graph, Node
from onnxexec.ir.types import TensorType
from onnxexec.passes.shape_inference import Facts, infer_shapes
from onnxexec.runtime.schemas import opset_range, schema
from onnxexec.runtime.validate_nodes import CONV_POOL, check_attributes, check_shapes
from onnxexec.runtime.validate_onnx import strict_inference_problems

# Domains whose schemas onnx ships (others: onnxexec's own, vendors' contrib ops).
_SCHEMA_DOMAINS = (ONNX_DOMAIN, ML_DOMAIN, "ai.onnx.preview.training")
_MAX_REPORTED = 10
# ops with attribute, shape or body checks in validate_nodes / _subgraph_arity
_STRUCTURAL = frozenset(
    {*CONV_POOL, "Conv", "ConvTranspose", "BatchNormalization", "If", "Loop", "Scan", "Reshape"}
)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: str, msg: str) -> None:
        self.problems.append(f"{where}: {msg}")

    # ----- graph level ---------------------------------------------------------
    def graph(self, g: Graph, outer: dict[str, Facts], top: bool) -> None:
        if top:
            self.opsets(g)
        defined: dict[str, str] = {}
        for v in (*g.inputs, *g.outputs):
            t = v.type
            if isinstance(t, TensorType) and not _known_elem(t.elem_type):
                self.fail(
                    f"graph '{g.name}'",
                    f"'{v.name}' is declared with element type {t.elem_type}, "
                    "which is no tensor type (0 = UNDEFINED)",
                )
            # a negative dim_value is no shape (onnx's C++ inference even aborts the
            # process on one: std::clamp asserts in Slice's), so it stops here
            dims = t.shape if isinstance(t, TensorType) and t.shape is not None else ()
            bad = [d for d in dims if isinstance(d, int) and d < 0]
            if bad:
                self.fail(
                    f"graph '{g.name}'",
                    f"'{v.name}' is declared with shape {list(dims)}: dimension {bad[0]} "
                    "is negative",
                )
        for v in g.inputs:
            if v.name in defined:
                self.fail(f"graph '{g.name}'", f"input '{v.name}' is declared twice")
            defined[v.name] = "a graph input"
        for n in g.nodes:
            for o in n.outputs:
                if not o:
                    continue
                if o in defined:
                    self.fail(
                        _where(n, g),
                        f"output '{o}' is already defined (by {defined[o]}); "
                        "every value has one definition",
                    )
                elif o in g.initializers:
                    self.fail(_where(n, g), f"output '{o}' is also an initializer")
                defined[o] = f"node '{n.label}'"
        facts = infer_shapes(g, outer)
        for n in g.nodes:
            self.node(n, g, facts)

    def opsets(self, g: Graph) -> None:
        for domain, version in g.opset_imports.items():
            known = opset_range(domain) if domain in _SCHEMA_DOMAINS else None
            if known is not None and not known[0] <= version <= known[1]:
                d = domain or "ai.onnx"
                self.fail(
                    f"model opset_import {d}",
                    f"opset {version} does not exist (known: {known[0]}..{known[1]})",
                )

    # ----- node level ----------------------------------------------------------
    def node(self, n: Node, g: Graph, facts: dict[str, Facts]) -> None:
        opset = g.opset_imports.get(n.domain)
        before = len(self.problems)
        if n.domain in _SCHEMA_DOMAINS and opset is not None:
            spec = _spec(n.op_type, opset, n.domain)
            if spec is not None:
                self.problems += _arity(n, spec)
                self.problems += _types(n, spec, facts)
        if n.op_type in _STRUCTURAL and n.domain == ONNX_DOMAIN:
            self.problems += check_attributes(n, facts)
            self.problems += check_shapes(n, facts)
            self.problems += _subgraph_arity(n, opset or 0)
        if len(self.problems) > before:  # name the node once its problems are known
            where = _where(n, g)
            self.problems[before:] = [f"{where}: {m}" for m in self.problems[before:]]
        for sg in n.subgraphs():
            self.graph(sg, facts, top=False)


@dataclass(frozen=True)
class _Param:
    name: str
    type_str: str
    optional: bool
    homogeneous: bool
    allowed: frozenset[str] | None  # tensor types a type variable allows; None: not tracked


@dataclass(frozen=True)
class _Spec:
    """What validation reads of one OpSchema, extracted once per (op, opset, domain)."""

    min_in: int
    max_in: int
    min_out: int
    max_out: int
    inputs: tuple[_Param, ...]
    type_vars: frozenset[str]


@lru_cache(maxsize=4096)
def _spec(op_type: str, opset: int, domain: str) -> _Spec | None:
    s = schema(op_type, opset, domain)
    if s is None or s.deprecated:
        return None
    allowed = {c.type_param_str: frozenset(c.allowed_type_strs) for c in s.type_constraints}
    params = []
    for p in s.inputs:
        ok = allowed.get(p.type_str, frozenset({p.type_str}))
        tracked = any(a.startswith("tensor(") for a in ok)  # not seq / optional / map
        params.append(
            _Param(
                p.name,
                p.type_str,
                p.option == p.option.Optional,
                bool(p.is_homogeneous),
                ok if tracked else None,
            )
        )
    return _Spec(
        s.min_input, s.max_input, s.min_output, s.max_output, tuple(params), frozenset(allowed)
    )


def _arity(n: Node, s: _Spec) -> list[str]:
    out = []
    ins = list(n.inputs)
    while ins and not ins[-1]:  # trailing omitted optionals may be left out
        ins.pop()
    if len(ins) < s.min_in <= len(n.inputs):
        ins = list(n.inputs)  # an empty name stands for a required input: say which
    if not s.min_in <= len(ins) <= s.max_in:
        out.append(f"takes {_range(s.min_in, s.max_in)} input(s), got {len(ins)}")
    if not s.min_out <= len(n.outputs) <= s.max_out:
        out.append(f"makes {_range(s.min_out, s.max_out)} output(s), got {len(n.outputs)}")
    for k, name, p in _formal(ins, s.inputs):
        if not name and not p.optional:
            out.append(f"input {k} ('{p.name}') is required but its name is empty")
    return out


def _types(n: Node, s: _Spec, facts: dict[str, Facts]) -> list[str]:
    out = []
    bound: dict[str, tuple[str, str]] = {}  # type var -> (type, input that bound it)
    for k, name, p in _formal(n.inputs, s.inputs):
        f = facts.get(name) if name else None
        if f is None or f.elem is None or p.allowed is None:
            continue
        t = _tensor_type(f.elem)
        if t not in p.allowed:
            out.append(
                f"input {k} ('{name}') has type {t}, which {p.type_str} of '{p.name}' "
                "does not allow"
            )
            continue
        if p.type_str not in s.type_vars or not p.homogeneous:
            continue
        prev = bound.setdefault(p.type_str, (t, name))
        if prev[0] != t:
            out.append(
                f"type parameter {p.type_str} is bound to {prev[0]} by '{prev[1]}' "
                f"and to {t} by '{name}'"
            )
    return out


@lru_cache(maxsize=64)
def _tensor_type(elem: int) -> str:
    return f"tensor({type_name(elem)})"


def _formal(names: Iterable[str], params: tuple[_Param, ...]) -> Iterable[tuple[int, str, _Param]]:
    """(index, actual name, formal parameter) for each actual input."""
    if not params:
        return
    for k, name in enumerate(names):
        yield k, name, params[min(k, len(params) - 1)]


def _known_elem(elem: int) -> bool:
    try:
        type_name(elem)
    except ValueError:
        return False
    return elem != 0


def _range(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    return f"{lo} or more" if hi >= 2**31 - 1 else f"{lo} to {hi}"


def _where(n: Node, g: Graph) -> str:
    dom = f"{n.domain}::" if n.domain else ""
    return f"node '{n.label}' ({dom}{n.op_type}, opset {g.opset(n.domain)})"


def _subgraph_arity(n: Node, opset: int) -> Iterable[str]:
    """If / Loop / Scan bodies whose inputs or outputs cannot match their node."""
    if n.domain != ONNX_DOMAIN:
        return
    a = n.attrs
    if n.op_type == "If":
        for key in ("then_branch", "else_branch"):
            b = a.get(key)
            if isinstance(b, Graph) and len(b.outputs) != len(n.outputs):
                yield (
                    f"attribute {key} has {len(b.outputs)} output(s), the node "
                    f"{len(n.outputs)} (then_branch and else_branch must match it)"
                )
    elif n.op_type == "Loop" and isinstance(a.get("body"), Graph):
        body, carried = a["body"], max(len(n.inputs) - 2, 0)
        if len(body.inputs) != 2 + carried:
            yield (
                f"attribute body takes {len(body.inputs)} input(s); a Loop with "
                f"{carried} carried value(s) gives it {2 + carried} (iteration, cond, carried)"
            )
        if len(body.outputs) < 1 + carried or len(n.outputs) < carried:
            yield (
                f"attribute body makes {len(body.outputs)} output(s); a Loop with "
                f"{carried} carried value(s) needs cond + {carried} + scan outputs "
                f"({len(n.outputs)} node outputs)"
            )
        elif len(body.outputs) - 1 != len(n.outputs):
            yield (
                f"attribute body makes {len(body.outputs)} output(s), the node has "
                f"{len(n.outputs)} (expected body outputs = 1 + node outputs)"
            )
    elif n.op_type == "Scan" and isinstance(a.get("body"), Graph) and opset >= 9:
        body = a["body"]
        if len(body.inputs) != len(n.inputs):
            yield (
                f"attribute body takes {len(body.inputs)} input(s), the node gives it "
                f"{len(n.inputs)} (state + scan inputs)"
            )
        if len(body.outputs) != len(n.outputs):
            yield (
                f"attribute body makes {len(body.outputs)} output(s), the node has "
                f"{len(n.outputs)} (state + scan outputs)"
            )


def validate_graph(g: Graph, source: Any = None) -> None:
    """Raise InvalidGraphError listing what is wrong with `g` (nothing when valid).

    `source`, the path / bytes / ModelProto `g` was loaded from, also gets onnx's
    strict type and shape inference (validate_onnx.py) once our own checks pass."""
    c = _Checker()
    c.graph(g, {}, top=True)
    if not c.problems and source is not None:
        nodes = {n.name: n for n in g.nodes if n.name}
        for name, op, msg in strict_inference_problems(source):
            n = nodes.get(name)
            where = _where(n, g) if n is not None else f"a {op} node"
            c.fail(where, f"onnx type/shape inference: {msg}")
    if c.problems:
        shown = c.problems[:_MAX_REPORTED]
        more = len(c.problems) - len(shown)
        tail = f" (and {more} more)" if more else ""
        raise InvalidGraphError("invalid model: " + "; ".join(shown) + tail)
