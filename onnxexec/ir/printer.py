"""Human-readable text of a Graph (`onnxexec info --graph`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.ir.graph import Graph, Node


def _attr(v: Any) -> str:
    if isinstance(v, np.ndarray):
        if v.size <= 8:
            return f"{v.dtype}{list(v.shape)}={v.reshape(-1).tolist()}"
        return f"{v.dtype}{list(v.shape)}"
    if isinstance(v, Graph):
        return f"<graph {v.name}: {len(v.nodes)} nodes>"
    if isinstance(v, tuple) and len(v) > 12:
        return f"({', '.join(map(repr, v[:12]))}, ... {len(v)} items)"
    return repr(v)


def _value(g: Graph, name: str) -> str:
    vi = g.value_info.get(name)
    if vi is None or vi.type is None:
        return name
    shape = getattr(vi.type, "shape_str", lambda: "")()
    return f"{name}: {vi.type}{shape}"


def format_node(n: Node) -> str:
    outs = ", ".join(o or "_" for o in n.outputs)
    ins = ", ".join(i or "_" for i in n.inputs)
    dom = f"{n.domain}::" if n.domain else ""
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in sorted(n.attrs.items()))
    name = f"  # {n.name}" if n.name else ""
    return f"{outs} = {dom}{n.op_type}({ins}{'; ' + attrs if attrs else ''}){name}"


def format_graph(g: Graph, indent: str = "") -> str:
    """Inputs, initializers (shapes only), nodes one per line, outputs; subgraphs nested."""
    lines = [f"{indent}graph {g.name} (opsets {dict(g.opset_imports)}):"]
    for v in g.inputs:
        shape = getattr(v.type, "shape_str", lambda: "")() if v.type else ""
        default = "  (has initializer)" if v.name in g.initializers else ""
        lines.append(f"{indent}  input  {v.name}: {v.type}{shape}{default}")
    for k, arr in g.initializers.items():
        desc = (
            f"{arr.dtype}{list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr).__name__
        )
        lines.append(f"{indent}  const  {k}: {desc}")
    for n in g.nodes:
        lines.append(f"{indent}  {format_node(n)}")
        for sg in n.subgraphs():
            lines.append(format_graph(sg, indent + "    "))
    for v in g.outputs:
        shape = getattr(v.type, "shape_str", lambda: "")() if v.type else ""
        lines.append(f"{indent}  output {v.name}: {v.type}{shape}")
    return "\n".join(lines)
