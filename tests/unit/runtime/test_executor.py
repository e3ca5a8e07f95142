"""Planner and executor behaviour on hand-built graphs.

Handlers here live in the private domain 'onnxexec.test' so the tests exercise the
executor alone, independent of the real op families.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxexec.errors import InvalidGraphError, NodeExecutionError, UnsupportedOpError
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.ops.registry import op, resolve, versions
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import plan_graph
from tests.unit.helpers import make_model, tensor_info

D = "onnxexec.test"
TEST_OPSET = helper.make_opsetid(D, 3)
ALIVE: list = []


@op("AddK", 1, domain=D)
def add_k_v1(x, *, k: float = 1.0):
    return x + np.float32(k)


@op("AddK", 3, domain=D)
def add_k_v3(x, *, k: float = 10.0):
    return x + np.float32(k)


@op("Track", 1, domain=D)
def track(x):
    """Returns a fresh array and remembers a weak reference to it."""
    y = x.copy()
    ALIVE.append(weakref.ref(y))
    return y


@op("Boom", 1, domain=D)
def boom(x):
    raise ValueError("kaboom")


@op("Cond", 1, domain=D, wants=("run_graph", "num_outputs"))
def cond(c, *, then_branch, else_branch, run_graph, num_outputs):
    outs = run_graph(then_branch if bool(c) else else_branch)
    assert len(outs) == num_outputs
    return tuple(outs)


def _model(nodes, inputs, outputs, **kw):
    return make_model(nodes, inputs, outputs, extra_opsets=[TEST_OPSET], **kw)


def test_registry_picks_largest_since_not_above_opset():
    assert versions(D, "AddK") == [1, 3]
    assert resolve(D, "AddK", 2).fn is add_k_v1
    assert resolve(D, "AddK", 3).fn is add_k_v3
    assert resolve(D, "AddK", 99).fn is add_k_v3
    assert resolve(D, "Nope", 3) is None


def test_attribute_defaults_come_from_the_signature():
    m = _model(
        [helper.make_node("AddK", ["x"], ["y"], domain=D)],
        [tensor_info("x", shape=[2])],
        [tensor_info("y")],
    )
    out = execute(plan_graph(load_onnx(m)), {"x": np.zeros(2, np.float32)})
    np.testing.assert_array_equal(out[0], [10, 10])


def test_values_are_dropped_after_last_use():
    ALIVE.clear()
    nodes = [
        helper.make_node("Track", ["x"], ["a"], domain=D),
        helper.make_node("Track", ["a"], ["b"], domain=D),
        helper.make_node("Track", ["b"], ["c"], domain=D),
    ]
    m = _model(nodes, [tensor_info("x", shape=[4])], [tensor_info("c")])
    plan = plan_graph(load_onnx(m))
    frees = {st.node.outputs[0]: [plan.slot_names[s] for s in st.free] for st in plan.steps}
    assert frees == {"a": ["x"], "b": ["a"], "c": ["b"]}
    out = execute(plan, {"x": np.ones(4, np.float32)})
    gc.collect()
    alive = [r() is not None for r in ALIVE]
    assert alive == [False, False, True]  # only the graph output survives
    np.testing.assert_array_equal(out[0], np.ones(4))


def test_all_unsupported_ops_reported_at_creation():
    nodes = [
        helper.make_node("Foo", ["x"], ["a"], name="n1", domain=D),
        helper.make_node("AddK", ["a"], ["b"], name="n2", domain=D),
        helper.make_node("Bar", ["b"], ["c"], name="n3", domain=D),
    ]
    m = _model(nodes, [tensor_info("x")], [tensor_info("c")])
    with pytest.raises(UnsupportedOpError) as e:
        plan_graph(load_onnx(m))
    msg = str(e.value)
    assert "2 unsupported" in msg and "Foo" in msg and "Bar" in msg and "'n1'" in msg


def test_unknown_and_missing_attributes_are_plan_errors():
    m = _model(
        [helper.make_node("AddK", ["x"], ["y"], name="bad", domain=D, kk=2.0)],
        [tensor_info("x")],
        [tensor_info("y")],
    )
    with pytest.raises(InvalidGraphError, match=r"'bad'.*unknown attribute 'kk'"):
        plan_graph(load_onnx(m))


def test_undefined_input_is_a_plan_error():
    m = _model(
        [helper.make_node("AddK", ["nowhere"], ["y"], name="n", domain=D)],
        [tensor_info("x")],
        [tensor_info("y")],
    )
    with pytest.raises(InvalidGraphError, match=r"'n'.*undefined.*nowhere"):
        plan_graph(load_onnx(m))


def test_unsorted_nodes_are_toposorted():
    nodes = [
        helper.make_node("AddK", ["a"], ["b"], domain=D, k=1.0),
        helper.make_node("AddK", ["x"], ["a"], domain=D, k=2.0),
    ]
    m = _model(nodes, [tensor_info("x", shape=[1])], [tensor_info("b")])
    out = execute(plan_graph(load_onnx(m)), {"x": np.zeros(1, np.float32)})
    np.testing.assert_array_equal(out[0], [3])


def test_errors_name_node_op_opset_and_input_types():
    m = _model(
        [helper.make_node("Boom", ["x"], ["y"], name="attn/Boom_3", domain=D)],
        [tensor_info("x")],
        [tensor_info("y")],
    )
    plan = plan_graph(load_onnx(m))
    with pytest.raises(NodeExecutionError) as e:
        execute(plan, {"x": np.zeros((2, 3), np.float32)})
    msg = str(e.value)
    assert "'attn/Boom_3'" in msg and "onnxexec.test::Boom" in msg and "opset 3" in msg
    assert "float32[2, 3]" in msg and "kaboom" in msg


def test_subgraph_reads_outer_scope_and_keeps_it_alive():
    then = helper.make_graph(
        [helper.make_node("AddK", ["outer"], ["t"], domain=D, k=1.0)],
        "then",
        [],
        [tensor_info("t")],
    )
    els = helper.make_graph(
        [helper.make_node("AddK", ["outer"], ["e"], domain=D, k=-1.0)],
        "else",
        [],
        [tensor_info("e")],
    )
    nodes = [
        helper.make_node("AddK", ["x"], ["outer"], domain=D, k=5.0),
        helper.make_node("Cond", ["c"], ["z"], domain=D, then_branch=then, else_branch=els),
    ]
    m = _model(
        nodes,
        [tensor_info("x", shape=[1]), tensor_info("c", TensorProto.BOOL, [])],
        [tensor_info("z")],
    )
    plan = plan_graph(load_onnx(m))
    cond_step = plan.steps[1]
    assert [name for name, _ in cond_step.implicit] == ["outer"]
    freed = [sorted(plan.slot_names[s] for s in st.free) for st in plan.steps]
    assert freed == [["x"], ["c", "outer"]]  # 'outer' lives until the subgraph ran
    x = np.zeros(1, np.float32)
    assert execute(plan, {"x": x, "c": np.array(True)})[0][0] == 6
    assert execute(plan, {"x": x, "c": np.array(False)})[0][0] == 4


def test_graph_output_may_be_an_input_or_initializer():
    m = _model(
        [],
        [tensor_info("x", shape=[1])],
        [tensor_info("x"), tensor_info("w")],
        initializers={"w": np.array([7.0], np.float32)},
    )
    out = execute(plan_graph(load_onnx(m)), {"x": np.array([1.0], np.float32)})
    assert out[0][0] == 1 and out[1][0] == 7
