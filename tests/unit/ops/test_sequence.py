"""Sequence and Optional ops; sequences are built in-graph with SequenceConstruct."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxexec.runtime.session import InferenceSession
from tests.unit.ops._node import run_node

F, I64 = TensorProto.FLOAT, TensorProto.INT64

A = np.array([[1.0, 2.0]], np.float32)
B = np.array([[3.0, 4.0]], np.float32)
C = np.array([[5.0, 6.0]], np.float32)


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def seq_vi(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def run(nodes, outputs, feeds, opset=17):
    inputs = [vi(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
    g = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return InferenceSession(model).run(None, feeds)


ABC = {"a": A, "b": B, "c": C}
CONSTRUCT = helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"])


def test_construct_at_length():
    nodes = [
        CONSTRUCT,
        helper.make_node("SequenceAt", ["s", "p"], ["x"]),
        helper.make_node("SequenceLength", ["s"], ["n"]),
    ]
    s, x, n = run(nodes, [seq_vi("s"), vi("x"), vi("n", I64)], {**ABC, "p": np.array(-1)})
    assert [e.tolist() for e in s] == [A.tolist(), B.tolist(), C.tolist()]
    np.testing.assert_array_equal(x, C)
    assert n.dtype == np.int64 and n.shape == () and n == 3


def test_insert_and_erase_positions():
    nodes = [
        CONSTRUCT,
        helper.make_node("SequenceInsert", ["s", "c", "p"], ["ins"]),  # before index -2
        helper.make_node("SequenceInsert", ["s", "a"], ["app"]),  # appended
        helper.make_node("SequenceErase", ["s"], ["del_last"]),
        helper.make_node("SequenceErase", ["s", "zero"], ["del_first"]),
    ]
    ins, app, del_last, del_first = run(
        nodes,
        [seq_vi("ins"), seq_vi("app"), seq_vi("del_last"), seq_vi("del_first")],
        {**ABC, "p": np.array(-2, np.int64), "zero": np.array(0, np.int64)},
    )
    assert [e[0, 0] for e in ins] == [1, 5, 3, 5]
    assert [e[0, 0] for e in app] == [1, 3, 5, 1]
    assert [e[0, 0] for e in del_last] == [1, 3]
    assert [e[0, 0] for e in del_first] == [3, 5]


def test_sequence_empty_then_insert():
    nodes = [
        helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
        helper.make_node("SequenceInsert", ["e", "a"], ["s"]),
        helper.make_node("SequenceLength", ["e"], ["n"]),
    ]
    s, n = run(nodes, [seq_vi("s"), vi("n", I64)], {"a": A})
    assert len(s) == 1 and n == 0


@pytest.mark.parametrize(
    ("split", "keepdims", "expected_shapes"),
    [
        (None, 1, [(1, 4)] * 3),
        (None, 0, [(4,)] * 3),
        (np.array(2, np.int64), 1, [(2, 4), (1, 4)]),  # scalar: last chunk smaller
        (np.array([1, 2], np.int64), 1, [(1, 4), (2, 4)]),
    ],
)
def test_split_to_sequence(split, keepdims, expected_shapes):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    feeds = {"x": x} if split is None else {"x": x, "split": split}
    node = helper.make_node("SplitToSequence", list(feeds), ["s"], axis=0, keepdims=keepdims)
    (s,) = run([node], [seq_vi("s")], feeds)
    assert [e.shape for e in s] == expected_shapes
    np.testing.assert_array_equal(np.concatenate([e.reshape(-1, 4) for e in s]), x)


def test_concat_from_sequence_axis_and_new_axis():
    nodes = [
        CONSTRUCT,
        helper.make_node("ConcatFromSequence", ["s"], ["cat"], axis=1),
        helper.make_node("ConcatFromSequence", ["s"], ["stk"], axis=-1, new_axis=1),
    ]
    cat, stk = run(nodes, [vi("cat"), vi("stk")], ABC)
    np.testing.assert_array_equal(cat, np.concatenate([A, B, C], axis=1))
    np.testing.assert_array_equal(stk, np.stack([A, B, C], axis=-1))
    assert stk.shape == (1, 2, 3)


def test_sequence_map_with_sequence_and_tensor_inputs():
    body = helper.make_graph(
        [
            helper.make_node("Add", ["x", "t"], ["sum"]),
            helper.make_node("Shape", ["x"], ["shape"]),
        ],
        "body",
        [vi("x", F, None), vi("t", F, None)],
        [vi("sum", F, None), vi("shape", I64, None)],
    )
    nodes = [
        CONSTRUCT,
        helper.make_node("SequenceMap", ["s", "t"], ["sums", "shapes"], body=body),
    ]
    t = np.array([10.0, 20.0], np.float32)
    sums, shapes = run(nodes, [seq_vi("sums"), seq_vi("shapes", I64)], {**ABC, "t": t})
    for got, x in zip(sums, (A, B, C), strict=True):
        np.testing.assert_array_equal(got, x + t)
    assert [s.tolist() for s in shapes] == [[1, 2]] * 3


def test_optional_ops():
    nodes = [
        helper.make_node("Optional", ["a"], ["o"]),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
        helper.make_node("OptionalGetElement", ["o"], ["got"]),
        helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(F, None)),
        helper.make_node("OptionalHasElement", ["none"], ["has_none"]),
    ]
    outs = [vi("has", TensorProto.BOOL), vi("got"), vi("has_none", TensorProto.BOOL)]
    has, got, has_none = run(nodes, outs, {"a": A}, opset=18)
    assert has.dtype == np.bool_ and has.shape == () and has
    np.testing.assert_array_equal(got, A)
    assert not has_none


def test_optional_has_element_omitted_input_and_plain_tensor_v18():
    (has,) = run_node("OptionalHasElement", [None], opset=18)
    assert has.shape == () and not has
    (has,) = run_node("OptionalHasElement", [A], opset=18)  # a tensor counts as present
    assert has
    (got,) = run_node("OptionalGetElement", [A], opset=18)
    np.testing.assert_array_equal(got, A)


def test_optional_get_element_on_empty_raises():
    nodes = [
        helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(F, None)),
        helper.make_node("OptionalGetElement", ["none"], ["x"]),
    ]
    with pytest.raises(Exception, match="empty"):
        run(nodes, [vi("x")], {"a": A}, opset=15)
