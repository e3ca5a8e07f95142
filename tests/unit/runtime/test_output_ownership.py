"""Outputs belong to the caller: editing one in place changes no feed, no later run
and no other output (onnxruntime hands out fresh arrays; so must we)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxexec
from onnxexec.runtime.ownership import OutputOwnership
from tests.unit.helpers import make_model, tensor_info

LEVELS = [0, 1, 99]
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _session(model: onnx.ModelProto, level: int) -> onnxexec.InferenceSession:
    so = onnxexec.SessionOptions()
    so.graph_optimization_level = level
    return onnxexec.InferenceSession(model.SerializeToString(), so)


def _x_in(shape: list[int] | None = None) -> onnx.ValueInfoProto:
    return tensor_info("x", shape=shape or [2, 3])


def _edit_feed_outputs(model: onnx.ModelProto, level: int) -> tuple[np.ndarray, list]:
    """Run on a copy of X, add 1 to every output in place; the feed afterwards."""
    x = X.copy()
    outs = _session(model, level).run(None, {"x": x})
    for y in outs:
        for a in y if isinstance(y, list) else [y]:
            a += 1
    return x, outs


VIEW_MODELS = {
    "identity": lambda: make_model(
        [helper.make_node("Identity", ["x"], ["y"])], [_x_in()], [tensor_info("y")]
    ),
    "reshape": lambda: make_model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [_x_in()],
        [tensor_info("y")],
        {"s": np.array([3, 2], np.int64)},
    ),
    "input_is_output": lambda: make_model([], [_x_in()], [tensor_info("x")]),
    "transpose": lambda: make_model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], [_x_in()], [tensor_info("y")]
    ),
    "split": lambda: make_model(
        [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)],
        [_x_in()],
        [tensor_info(n) for n in "abc"],
        opset=18,
    ),
    "sequence": lambda: make_model(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["s"])],
        [_x_in()],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
    ),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("case", sorted(VIEW_MODELS))
def test_editing_an_output_leaves_the_feed_alone(case: str, level: int) -> None:
    x, outs = _edit_feed_outputs(VIEW_MODELS[case](), level)
    np.testing.assert_array_equal(x, X)
    assert all(not np.shares_memory(x, y) for y in outs if isinstance(y, np.ndarray))


def _folded_model() -> onnx.ModelProto:
    """y = c1 + c2 (folded to one constant at levels >= 1), z = c1 (an initializer as
    an output), k = a Constant node's value; all independent of x."""
    return make_model(
        [
            helper.make_node("Add", ["c1", "c2"], ["y"]),
            helper.make_node("Identity", ["c1"], ["z"]),
            helper.make_node(
                "Constant",
                [],
                ["k"],
                value=helper.make_tensor("kv", TensorProto.FLOAT, [2], [7, 8]),
            ),
            helper.make_node("Relu", ["x"], ["r"]),
        ],
        [_x_in()],
        [tensor_info("y"), tensor_info("z"), tensor_info("k"), tensor_info("r"), tensor_info("c1")],
        {"c1": np.array([1.0, 2.0], np.float32), "c2": np.array([10.0, 20.0], np.float32)},
    )


@pytest.mark.parametrize("level", LEVELS)
def test_editing_a_constant_output_does_not_change_the_next_run(level: int) -> None:
    sess = _session(_folded_model(), level)
    first = sess.run(None, {"x": X})
    for y in first:
        y *= -3
    y, z, k, r, c1 = sess.run(None, {"x": X})
    np.testing.assert_array_equal(y, [11.0, 22.0])
    np.testing.assert_array_equal(z, [1.0, 2.0])
    np.testing.assert_array_equal(k, [7.0, 8.0])
    np.testing.assert_array_equal(r, X)
    np.testing.assert_array_equal(c1, [1.0, 2.0])


@pytest.mark.parametrize("level", LEVELS)
def test_a_branch_returning_its_initializer_hands_out_a_copy(level: int) -> None:
    const = helper.make_tensor("t", TensorProto.FLOAT, [2], [3.0, 4.0])
    then = helper.make_graph([], "then", [], [tensor_info("t", shape=[2])], [const])
    other = helper.make_graph(
        [helper.make_node("Neg", ["t2"], ["o"])],
        "else",
        [],
        [tensor_info("o", shape=[2])],
        [helper.make_tensor("t2", TensorProto.FLOAT, [2], [3.0, 4.0])],
    )
    model = make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [tensor_info("c", TensorProto.BOOL, [])],
        [tensor_info("y", shape=[2])],
    )
    sess = _session(model, level)
    sess.run(None, {"c": np.array(True)})[0][:] = 0
    np.testing.assert_array_equal(sess.run(None, {"c": np.array(True)})[0], [3.0, 4.0])


@pytest.mark.parametrize("level", LEVELS)
def test_two_outputs_naming_one_value_are_two_arrays(level: int) -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Identity", ["t"], ["u"])],
        [_x_in()],
        [tensor_info("t"), tensor_info("u")],
    )
    sess = _session(model, level)
    t, u = sess.run(None, {"x": X})
    t += 100
    np.testing.assert_array_equal(u, X)
    a, b = sess.run(["t", "t"], {"x": X})
    a += 100
    np.testing.assert_array_equal(b, X)


def test_outputs_of_two_runs_share_no_memory() -> None:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "s"], ["y"])],
        [_x_in()],
        [tensor_info("y")],
        {"s": np.array([-1], np.int64)},
    )
    sess = _session(model, 99)
    (first,) = sess.run(None, {"x": X})
    (second,) = sess.run(None, {"x": X})
    assert not np.shares_memory(first, second)


def test_fresh_outputs_are_not_copied() -> None:
    """The check costs a base walk per output, never a copy of a fresh array: disjoint
    views of one fresh array (Split) stay views."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [_x_in()], [tensor_info("y")])
    sess = _session(model, 0)
    own = OutputOwnership(sess._plan)
    fresh = np.ones((4, 2), np.float32)
    halves = [fresh[:2], fresh[2:]]
    assert own([fresh], {"x": X})[0] is fresh
    out = own(halves, {"x": X})
    assert out[0] is halves[0] and out[1] is halves[1]
    # a view of the feed, and an output given twice, are copied
    view, again = own([X[:1], fresh, fresh], {"x": X})[::2]
    assert not np.shares_memory(view, X) and again is not fresh
