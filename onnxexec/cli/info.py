"""`onnxexec info MODEL`: what a model is, without running it."""

from __future__ import annotations

from collections import Counter

import click

from onnxexec.cli.common import verbose_option
from onnxexec.ir.graph import Graph
from onnxexec.ir.printer import format_graph
from onnxexec.ir.types import TensorType


def _count_ops(g: Graph, counts: Counter) -> None:
    for n in g.nodes:
        counts[f"{n.domain}::{n.op_type}" if n.domain else n.op_type] += 1
        for sg in n.subgraphs():
            _count_ops(sg, counts)


def _human(n: float) -> str:
    for unit in ("", "K", "M", "G"):
        if abs(n) < 1000:
            return f"{n:.4g}{unit}"
        n /= 1000
    return f"{n:.4g}T"


def describe_graph(g: Graph) -> list[str]:
    m = g.metadata
    lines = []
    if m.get("producer_name") or m.get("producer_version"):
        lines.append(
            f"producer: {m.get('producer_name', '')} {m.get('producer_version', '')}".rstrip()
        )
    if "ir_version" in m:
        lines.append(f"ir_version: {m['ir_version']}")
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(g.opset_imports.items()))
    lines.append(f"opset imports: {opsets}")
    lines.append("inputs:")
    for v in g.runtime_inputs():
        shape = v.type.shape_str() if isinstance(v.type, TensorType) else ""
        lines.append(f"  {v.name}: {v.type}{shape}")
    lines.append("outputs:")
    for v in g.outputs:
        shape = v.type.shape_str() if isinstance(v.type, TensorType) else ""
        lines.append(f"  {v.name}: {v.type}{shape}")
    count, nbytes = g.parameter_count()
    lines.append(
        f"parameters: {count:,} ({_human(count)}) in {len(g.initializers)} "
        f"initializers, {_human(nbytes)}B"
    )
    counts: Counter = Counter()
    _count_ops(g, counts)
    lines.append(f"nodes: {sum(counts.values())} ({len(counts)} op types)")
    for op, c in counts.most_common():
        lines.append(f"  {op:<32}{c:>6}")
    for k, v in (m.get("custom_metadata_map") or {}).items():
        lines.append(f"metadata {k}: {v}")
    return lines


@click.command("info")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--graph", "show_graph", is_flag=True, help="Print the IR graph, one node a line.")
@verbose_option
def info_cmd(model: str, show_graph: bool) -> None:
    """Producer, opsets, inputs/outputs, op histogram and parameter count of MODEL."""
    if model.lower().endswith(".gguf"):
        from onnxexec.llm.info import describe_gguf

        for line in describe_gguf(model, show_graph):
            click.echo(line)
        return
    from onnxexec.loaders.onnx_proto import load_onnx

    g = load_onnx(model)
    for line in describe_graph(g):
        click.echo(line)
    if show_graph:
        click.echo(format_graph(g))


COMMANDS = [info_cmd]
