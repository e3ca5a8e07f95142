"""Expand calls of model-local functions (FunctionProto) into their body nodes.

Per the ONNX IR spec (IR.md, "Functions"), a call binds the formal inputs,
outputs and attributes; body-internal names are private to each call, so they are
renamed with a per-call prefix. Attribute references (`ref_attr_name`) take the
caller's value or the function's default; an unset one drops the attribute.
"""

from __future__ import annotations

from itertools import count
from typing import Any

from onnxexec.errors import InvalidGraphError
from onnxexec.ir.graph import Function, Graph, Node


def _is_ref(v: Any) -> bool:
    return type(v).__name__ == "AttrRef"


def _bind_attrs(attrs: dict[str, Any], call_attrs: dict[str, Any], fn: Function) -> dict:
    out = {}
    for k, v in attrs.items():
        if _is_ref(v):
            if v.name in call_attrs:
                out[k] = call_attrs[v.name]
            elif v.name in fn.attribute_defaults:
                out[k] = fn.attribute_defaults[v.name]
        elif isinstance(v, Graph):
            out[k] = _rebind_graph(v, call_attrs, fn)
        else:
            out[k] = v
    return out


def _rebind_graph(g: Graph, call_attrs: dict[str, Any], fn: Function) -> Graph:
    nodes = tuple(
        Node(
            n.op_type,
            n.inputs,
            n.outputs,
            _bind_attrs(dict(n.attrs), call_attrs, fn),
            n.name,
            n.domain,
        )
        for n in g.nodes
    )
    return Graph(
        nodes,
        g.inputs,
        g.outputs,
        g.initializers,
        g.value_info,
        g.opset_imports,
        g.functions,
        g.name,
        g.metadata,
    )


def _expand(node: Node, fn: Function, functions: dict, ids: count, depth: int) -> list[Node]:
    if depth > 64:
        raise InvalidGraphError(f"function '{fn.name}': recursion deeper than 64 calls")
    prefix = f"{node.label}::{fn.name}#{next(ids)}/"
    rename: dict[str, str] = {"": ""}
    for formal, actual in zip(fn.inputs, node.inputs, strict=False):
        rename[formal] = actual
    for formal in fn.inputs[len(node.inputs) :]:
        rename[formal] = ""
    for formal, actual in zip(fn.outputs, node.outputs, strict=False):
        rename[formal] = actual

    def r(name: str) -> str:
        if name not in rename:
            rename[name] = prefix + name
        return rename[name]

    out: list[Node] = []
    call_attrs = dict(node.attrs)
    for body in fn.nodes:
        attrs = _bind_attrs(dict(body.attrs), call_attrs, fn)
        attrs = {k: _rename_free(v, r) if isinstance(v, Graph) else v for k, v in attrs.items()}
        inner = Node(
            body.op_type,
            tuple(r(i) for i in body.inputs),
            tuple(r(o) for o in body.outputs),
            attrs,
            prefix + (body.name or body.op_type),
            body.domain,
        )
        key = (inner.domain, inner.op_type)
        if key in functions:
            out.extend(_expand(inner, functions[key], functions, ids, depth + 1))
        else:
            out.append(inner)
    return out


def _rename_free(g: Graph, r: Any) -> Graph:
    """Rename the outer-scope names a subgraph inside a function body refers to."""
    free = g.free_names()
    if not free:
        return g
    mapping = {n: r(n) for n in free}
    nodes = tuple(
        Node(
            n.op_type,
            tuple(mapping.get(i, i) for i in n.inputs),
            n.outputs,
            {
                k: _rename_free(v, lambda x: mapping.get(x, x)) if isinstance(v, Graph) else v
                for k, v in n.attrs.items()
            },
            n.name,
            n.domain,
        )
        for n in g.nodes
    )
    return Graph(
        nodes,
        g.inputs,
        g.outputs,
        g.initializers,
        g.value_info,
        g.opset_imports,
        g.functions,
        g.name,
        g.metadata,
    )


def inline_functions(g: Graph, functions: dict | None = None) -> Graph:
    """Graph with every call of a model-local function replaced by its body.

    `functions` defaults to the graph's own table; subgraphs pass their model's.
    """
    functions = dict(g.functions if functions is None else functions)
    if not functions or not any((n.domain, n.op_type) in functions for n in g.nodes):
        return g
    ids = count()
    nodes: list[Node] = []
    for n in g.nodes:
        if (n.domain, n.op_type) in functions:
            nodes.extend(_expand(n, functions[(n.domain, n.op_type)], functions, ids, 0))
        else:
            nodes.append(n)
    return Graph(
        tuple(nodes),
        g.inputs,
        g.outputs,
        g.initializers,
        g.value_info,
        g.opset_imports,
        g.functions,
        g.name,
        g.metadata,
    )
