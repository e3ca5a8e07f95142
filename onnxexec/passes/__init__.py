"""Graph-to-graph rewrites, one per module; `optimize` runs them by level (pipeline.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxexec.ir.graph import Graph
    from onnxexec.passes.pack_weights import WeightOwnership


def optimize(graph: Graph, level: int = 99, owner: WeightOwnership | None = None) -> Graph:
    """`graph` optimized at onnxruntime's `level` (0, 1, 2 or 99); see pipeline.py."""
    from onnxexec.passes.pipeline import optimize as run

    return run(graph, level, owner)
