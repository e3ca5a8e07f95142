"""The `prepare` hook of ops/registry.py: per-node state made once at planning time
from the node's constant inputs and attributes, passed to every run of that node as
`prepared`, owned by the plan (one state per node, freed with it), never an attribute.

Handlers live in the private domain 'onnxexec.test.prep' (the executor alone)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from onnx import helper

from onnxexec.errors import InvalidGraphError
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.ops.registry import op, resolve
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import plan_graph
from tests.unit.helpers import make_model, tensor_info

D = "onnxexec.test.prep"
CALLS: list[tuple[tuple, dict]] = []


class Scaled:
    """What the hook makes: the constant weight times the attribute (a plan-time
    product the handler then reuses), and how often the handler read it."""

    def __init__(self, w: np.ndarray | None, k: float) -> None:
        self.wk = None if w is None else w * np.float32(k)
        self.runs = 0


def _prepare(consts: tuple, attrs: dict) -> Scaled:
    CALLS.append((consts, attrs))
    if attrs.get("k", 1.0) < 0:
        raise ValueError("k must be >= 0")
    return Scaled(consts[1], attrs.get("k", 1.0))


@op("ScaledAdd", 1, domain=D, prepare=_prepare)
def scaled_add(x, w, *, k: float = 1.0, prepared: Scaled | None = None):
    """x + w * k; with a plan, w * k comes from the node's prepared state."""
    if prepared is not None and prepared.wk is not None:
        prepared.runs += 1
        return x + prepared.wk
    return x + w * np.float32(k)


def _graph(k: float = 2.0, const_w: bool = True, nodes: int = 1):
    chain = [
        helper.make_node("ScaledAdd", [f"h{i}", "w"], [f"h{i + 1}"], domain=D, k=k)
        for i in range(nodes)
    ]
    inputs = [tensor_info("h0", shape=[3])]
    if not const_w:
        inputs.append(tensor_info("w", shape=[3]))
    m = make_model(
        chain,
        inputs,
        [tensor_info(f"h{nodes}")],
        initializers={"w": np.arange(3, dtype=np.float32)} if const_w else None,
        extra_opsets=[helper.make_opsetid(D, 1)],
    )
    return load_onnx(m)


def test_prepared_once_at_planning_and_reused_every_run():
    CALLS.clear()
    plan = plan_graph(_graph(k=2.0, nodes=2))
    assert len(CALLS) == 2  # one state per node, made before any run
    consts, attrs = CALLS[0]
    assert consts[0] is None and np.array_equal(consts[1], [0, 1, 2])
    assert attrs == {"k": 2.0}
    states = [s.kwargs["prepared"] for s in plan.steps]
    assert states[0] is not states[1]
    x = np.ones(3, np.float32)
    for _ in range(3):
        (y,) = execute(plan, {"h0": x})
        np.testing.assert_array_equal(y, 1 + 2 * 2.0 * np.arange(3))  # numpy oracle
    assert len(CALLS) == 2 and [s.runs for s in states] == [3, 3]


def test_prepared_is_not_an_attribute():
    h = resolve(D, "ScaledAdd", 1)
    assert h is not None and "prepared" not in h.attributes and "k" in h.attributes
    bad = helper.make_node("ScaledAdd", ["h0", "w"], ["h1"], domain=D, prepared=1)
    m = make_model(
        [bad],
        [tensor_info("h0", shape=[3]), tensor_info("w", shape=[3])],
        [tensor_info("h1")],
        extra_opsets=[helper.make_opsetid(D, 1)],
    )
    with pytest.raises(InvalidGraphError, match="unknown attribute 'prepared'"):
        plan_graph(load_onnx(m))


def test_a_graph_input_is_not_a_constant():
    CALLS.clear()
    plan = plan_graph(_graph(const_w=False))
    assert CALLS[0][0] == (None, None)
    w = np.full(3, 5, np.float32)
    (y,) = execute(plan, {"h0": np.zeros(3, np.float32), "w": w})
    np.testing.assert_array_equal(y, w * 2.0)


def test_a_failing_hook_names_the_node():
    with pytest.raises(InvalidGraphError, match=r"ScaledAdd.*k must be >= 0"):
        plan_graph(_graph(k=-1.0))


def test_the_state_goes_with_the_plan():
    plan = plan_graph(_graph())
    gone = weakref.ref(plan.steps[0].kwargs["prepared"])
    del plan
    gc.collect()
    assert gone() is None


def test_a_hook_needs_the_prepared_keyword():
    with pytest.raises(ValueError, match="prepared"):

        @op("NoKw", 1, domain=D, prepare=_prepare)
        def no_kw(x):
            return x
