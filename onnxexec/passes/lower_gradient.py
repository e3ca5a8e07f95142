"""Give each ai.onnx.preview.training::Gradient node the graph it differentiates.

Gradient(xs, zs, y) refers to tensors of the *enclosing* graph by name, which a
handler never sees. This pass cuts the slice of nodes computing `y` from
`xs + zs` into a subgraph ("forward": inputs xs + zs, outputs every value the
slice reads or writes) and replaces the node with onnxexec::Gradient carrying it,
so the executor plans it like any subgraph (outer values become implicit inputs)
and the handler (ops/training.py) runs it and back-propagates.
"""

from __future__ import annotations

from onnxexec.errors import InvalidGraphError
from onnxexec.ir.graph import Graph, Node, ValueInfo

TRAINING_DOMAIN = "ai.onnx.preview.training"


def _forward_slice(g: Graph, leaves: set[str], y: str) -> list[Node]:
    """Nodes producing `y` from `leaves` (other sources are constants), in dependency order."""
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    ordered: list[Node] = []
    seen: set[int] = set()

    def visit(name: str) -> None:
        n = producer.get(name)
        if name in leaves or n is None or id(n) in seen:
            return
        seen.add(id(n))
        for i in n.inputs:
            if i:
                visit(i)
        ordered.append(n)

    visit(y)
    return ordered


def _lower(g: Graph, node: Node) -> Node:
    xs = tuple(node.attrs.get("xs", ()))
    zs = tuple(node.attrs.get("zs", ()))
    y = node.attrs.get("y")
    if not xs or not y:
        raise InvalidGraphError(f"Gradient node '{node.label}' needs attributes xs and y")
    nodes = _forward_slice(g, set(xs) | set(zs), y)
    names: list[str] = [*xs, *zs]
    for n in nodes:
        names += [v for v in (*n.inputs, *n.outputs) if v and v not in names]
    if y not in names:
        names.append(y)
    forward = Graph(
        nodes=tuple(nodes),
        inputs=tuple(ValueInfo(v) for v in (*xs, *zs)),
        outputs=tuple(ValueInfo(v) for v in names),
        opset_imports=g.opset_imports,
        functions=g.functions,
        name=f"{node.label}/forward",
    )
    attrs = {"xs": xs, "zs": zs, "y": y, "forward": forward}
    return Node("Gradient", node.inputs, node.outputs, attrs, node.name, "onnxexec")


def lower_gradient(g: Graph) -> Graph:
    """`g` with every training-domain Gradient node lowered; `g` itself when there is none."""
    if not any(n.op_type == "Gradient" and n.domain == TRAINING_DOMAIN for n in g.nodes):
        return g
    nodes = tuple(
        _lower(g, n) if n.op_type == "Gradient" and n.domain == TRAINING_DOMAIN else n
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
