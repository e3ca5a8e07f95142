"""Session creation is linear in graph size: counted in Python calls, not timed.

Quadratic work (relabelling a whole fused chain per node, walking an alias chain per
reader, re-scanning every pending node per toposort round) shows as a call count that
grows with n^2; the timings live in benchmarks/bench_create.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

import onnxexec

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "models"))
from build_chain import DEFAULT_OPS, chain_model

sys.path.pop(0)

SMALL, LARGE = 300, 2400  # 8x the nodes: linear ~8x the calls, quadratic ~64x


def _reversed(m: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with its nodes listed last-first (ONNX wants topological order;
    exporters do not always comply, so planning sorts)."""
    nodes = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(reversed(nodes))
    return m


CASES: dict[str, Callable[[int], onnx.ModelProto]] = {
    # one fused elementwise chain of n nodes
    "elementwise": lambda n: chain_model(n, ("Add", "Relu", "Mul", "Sigmoid", "Neg")),
    # n removed no-ops, each aliasing the one before
    "identity": lambda n: chain_model(n, ("Identity",)),
    "mixed": lambda n: chain_model(n, DEFAULT_OPS),
    "reversed": lambda n: _reversed(chain_model(n, ("Relu", "Transpose"))),
}


def _calls_to_create(model: bytes, level: int) -> int:
    count = 0

    def tick(frame: object, event: str, arg: object) -> None:
        nonlocal count
        count += 1

    so = onnxexec.SessionOptions()
    so.graph_optimization_level = level
    sys.setprofile(tick)
    try:
        onnxexec.InferenceSession(model, so)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("level", [0, 99])
@pytest.mark.parametrize("case", sorted(CASES))
def test_creation_calls_grow_linearly(case: str, level: int) -> None:
    build = CASES[case]
    # pays the one-off imports and kernel loading outside the counts
    onnxexec.InferenceSession(build(16).SerializeToString())
    small = _calls_to_create(build(SMALL).SerializeToString(), level)
    large = _calls_to_create(build(LARGE).SerializeToString(), level)
    ratio = large / small
    assert ratio < 1.5 * LARGE / SMALL, f"{case}: {small} -> {large} calls ({ratio:.1f}x)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_long_chains_compute_what_level_0_computes(case: str) -> None:
    """The chains the counts run on are long enough to have broken alias resolution
    (capped at 1000 steps once); every level must agree with the unoptimized graph."""
    model = CASES[case](2500).SerializeToString()
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    results = []
    for level in (0, 99):
        so = onnxexec.SessionOptions()
        so.graph_optimization_level = level
        results.append(onnxexec.InferenceSession(model, so).run(None, {"x": x})[0])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)
