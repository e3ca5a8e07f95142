"""The graph optimization pipeline, by onnxruntime's levels.

- 0  ORT_DISABLE_ALL: the graph as loaded.
- 1  ORT_ENABLE_BASIC: semantics-preserving cleanup with only standard ops:
     constant folding, shape folding, no-op and dead-node elimination, layout
     Transposes merged / moved past elementwise ops, CSE.
- 2  ORT_ENABLE_EXTENDED: + fusions into onnxexec-domain ops (MatMul+Add, Conv+BN,
     activations, LayerNorm, RMSNorm, GELU, attention, elementwise chains).
- 99 ORT_ENABLE_ALL: + kernel-specific weight layouts (pre-packed weights).

GGUF decoder graphs (llm/graph.py) take their own pass set through the same loop:
`fuse_llm` (passes/llm_blocks.py, layer-sized ops).

Each pass returns its input unchanged when it has nothing to do, so the loop below
stops as soon as a round changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from onnxexec.ir.graph import Graph
from onnxexec.passes._patterns import clear_caches
from onnxexec.passes.cse import cse
from onnxexec.passes.eliminate import eliminate_dead, eliminate_noops
from onnxexec.passes.fold_constants import fold_constants
from onnxexec.passes.fold_shapes import fold_shapes
from onnxexec.passes.fold_transposes import fold_transposes
from onnxexec.passes.inline_functions import inline_functions
from onnxexec.passes.lower_gradient import lower_gradient
from onnxexec.passes.pack_weights import WeightOwnership, WeightsSpentError, owned_weights

log = logging.getLogger("onnxexec")

Pass = Callable[[Graph], Graph]

DISABLE_ALL, ENABLE_BASIC, ENABLE_EXTENDED, ENABLE_ALL = 0, 1, 2, 99

BASIC: list[Pass] = [
    fold_constants,
    fold_shapes,
    eliminate_noops,
    fold_transposes,
    cse,
    eliminate_dead,
]


def _extended() -> list[Pass]:
    from onnxexec.passes import fusions

    return fusions.EXTENDED


def _layout() -> list[Pass]:
    from onnxexec.passes import fusions

    return fusions.LAYOUT


def _run(g: Graph, passes: list[Pass], rounds: int) -> Graph:
    for _ in range(rounds):
        before = g
        for p in passes:
            try:
                g = p(g)
            except WeightsSpentError:
                raise
            except Exception:  # an optimizer bug must not stop the model from running
                log.warning("graph pass %s failed; skipped", p.__name__, exc_info=True)
        if g is before:
            break
    return g


def optimize(g: Graph, level: int = ENABLE_ALL, owner: WeightOwnership | None = None) -> Graph:
    """`g` rewritten by the passes of `level` (0, 1, 2 or 99); `g` itself at level 0.

    `owner`: given by a caller that owns `g`'s weights, letting the layout passes
    overwrite them in place (pack_weights.WeightOwnership says when `g` is spent)."""
    level = int(level)
    if level <= DISABLE_ALL:
        return g
    # Gradient nodes name values of this graph: cut their forward slice out first, so
    # the rewrites below cannot rename or fuse what the derivative rules read.
    g = lower_gradient(inline_functions(g))
    try:
        g = _run(g, BASIC, 4)
        if level >= ENABLE_EXTENDED:
            g = _run(g, _extended(), 2)
            g = _run(g, BASIC, 2)
        if level >= ENABLE_ALL:
            with owned_weights(owner):
                g = _run(g, _layout(), 1)
    finally:
        clear_caches()  # drop the intermediate graphs (and their folded arrays)
    return g


def fuse_llm(g: Graph) -> Graph:
    """A decoder graph of llm/graph.py with its layers fused (passes/llm_blocks.py)."""
    from onnxexec.passes import llm_blocks

    try:
        return _run(g, llm_blocks.PASSES, 2)
    finally:
        clear_caches()
