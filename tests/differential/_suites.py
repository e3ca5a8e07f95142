"""Level 0 against levels 1, 2, 99 on the ONNX backend suites' models (the node suite
and the wheel's model suites), with their own inputs.

The model is loaded once and optimized per level; a level whose optimized graph is the
loaded graph itself (every pass returned its input, as for most single-node cases) or
the previous level's graph runs nothing new and is counted as identical."""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import numpy as np

from onnxexec.conformance.compare import compare_outputs
from onnxexec.conformance.suites import Case, light_data
from onnxexec.ir.graph import Graph
from onnxexec.passes import optimize
from onnxexec.passes.fold_constants import NONDETERMINISTIC
from onnxexec.runtime.session import InferenceSession, load_graph

LEVELS = (1, 2, 99)
NODE_TOL = (1e-5, 1e-6)  # float32 noise of another kernel / summation order
SUITE_STATS: Counter[str] = Counter()


def _run(g: Graph, data: list[tuple[list[Any], list[Any]]]) -> list[list[Any]]:
    sess = InferenceSession(g)  # level 0: runs `g` as given
    names = [i.name for i in sess.get_inputs()]
    all_names = [v.name for v in sess.graph.inputs]
    outs = []
    for inputs, _ in data:
        order = names if len(inputs) <= len(names) else all_names
        outs.append(sess.run(None, dict(zip(order, inputs, strict=False))))
    return outs


def differential_case(case: Case) -> str:
    """'skipped: ...', 'identical' or 'compared'; raises Mismatch / AssertionError when a
    level's outputs differ from level 0's beyond the tolerance."""
    model = case.load()
    if any(n.op_type in NONDETERMINISTIC or "Bernoulli" in n.op_type for n in model.graph.node):
        return "skipped: random op"
    data = light_data(case) if case.suite == "light" else case.data_sets
    rtol, atol = (case.rtol, case.atol) if case.suite == "light" else NODE_TOL
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            g0 = load_graph(model)
            ref = _run(g0, data)
        except Exception as e:  # what conformance reports: nothing to compare against
            return f"skipped: level 0 raises {type(e).__name__}"
        status, prev = "identical", g0
        for lv in LEVELS:
            g = optimize(g0, lv)
            if g is g0 or g is prev:
                continue
            prev, status = g, "compared"
            for k, outs in enumerate(_run(g, data)):
                try:
                    compare_outputs(ref[k], outs, rtol, atol)
                except AssertionError as e:
                    raise AssertionError(f"level {lv}, data set {k}: {e}") from None
    return status
