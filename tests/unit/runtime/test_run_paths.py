"""The executor's and the session's fast per-run paths behave like the general ones:
omitted inputs/outputs, tuple results, feed checking with validate_feeds' errors,
debug logging."""

from __future__ import annotations

import logging
import types

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxexec
from onnxexec.errors import InvalidFeedError, NodeExecutionError
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.ops.registry import op
from onnxexec.runtime.executor import execute
from onnxexec.runtime.feeds import FeedChecker, validate_feeds
from onnxexec.runtime.plan import plan_graph
from tests.unit.helpers import make_model, tensor_info
from tests.unit.runtime.test_executor import TEST_OPSET

D = "onnxexec.test"
SEEN: list = []


@op("RecordOpt", 1, domain=D)
def record_opt(x, y=None):
    """Records whether its optional second input arrived; returns x + 1."""
    SEEN.append(y)
    return x + np.float32(1)


@op("Pair", 1, domain=D)
def pair(x):
    return x * np.float32(2), x * np.float32(3)


@op("Short", 1, domain=D)
def short(x):
    return (x,)


def _plan(nodes, inputs, outputs):
    return plan_graph(load_onnx(make_model(nodes, inputs, outputs, extra_opsets=[TEST_OPSET])))


def test_omitted_input_reads_none_even_after_an_omitted_single_output():
    SEEN.clear()
    nodes = [
        helper.make_node("Short", ["x"], [""], domain=D),  # its only output is dropped
        helper.make_node("RecordOpt", ["x", ""], ["y"], domain=D),
        helper.make_node("RecordOpt", ["y"], ["z"], domain=D),
    ]
    plan = _plan(nodes, [tensor_info("x", shape=[2])], [tensor_info("z")])
    out = execute(plan, {"x": np.zeros(2, np.float32)})
    np.testing.assert_array_equal(out[0], [2, 2])
    assert SEEN == [None, None]


def test_tuple_results_fill_single_and_multiple_outputs():
    nodes = [
        helper.make_node("Short", ["x"], ["s"], domain=D),
        helper.make_node("Pair", ["s"], ["a", "b"], domain=D),
    ]
    plan = _plan(nodes, [tensor_info("x", shape=[1])], [tensor_info("a"), tensor_info("b")])
    a, b = execute(plan, {"x": np.ones(1, np.float32)})
    assert a[0] == 2 and b[0] == 3
    # positional inputs (the subgraph form) take the same path
    a, b = execute(plan, [np.ones(1, np.float32)])
    assert a[0] == 2 and b[0] == 3


def test_too_few_results_name_the_node():
    nodes = [helper.make_node("Short", ["x"], ["a", "b"], name="s1", domain=D)]
    plan = _plan(nodes, [tensor_info("x", shape=[1])], [tensor_info("a"), tensor_info("b")])
    with pytest.raises(NodeExecutionError, match=r"'s1'.*returned 1 outputs, node declares 2"):
        execute(plan, {"x": np.ones(1, np.float32)})


def _declared():
    m = make_model(
        [helper.make_node("RecordOpt", ["x", "w"], ["y"], domain=D)],
        [
            tensor_info("x", shape=["n", 3]),
            tensor_info("w", shape=[2]),
            tensor_info("s", TensorProto.STRING, [None]),
        ],
        [tensor_info("y")],
        extra_opsets=[TEST_OPSET],
    )
    g = load_onnx(m)
    return tuple(g.inputs)


GOOD = {
    "x": np.zeros((4, 3), np.float32),
    "w": np.ones(2, np.float32),
    "s": np.array(["a", "b"], object),
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"x": np.zeros((4, 3), np.float64)},
        {"x": np.zeros(3, np.float32)},
        {"x": np.zeros((4, 2), np.float32)},
        {"w": np.ones(3, np.float32)},
        {"w": [1.0, 2.0]},
        {"w": np.float32(1)},
        {"s": np.array(["a", "b"])},  # numpy unicode becomes object
        {"s": np.zeros(2, np.float32)},
        {"q": np.ones(1)},
        {"x": None},
    ],
)
def test_feed_checker_agrees_with_validate_feeds(change):
    declared = _declared()
    feed = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    defaults = {}
    checker = FeedChecker(declared, defaults)
    try:
        want = validate_feeds(feed, declared, defaults)
    except InvalidFeedError as e:
        with pytest.raises(InvalidFeedError) as got:
            checker(feed)
        assert str(got.value) == str(e)
        return
    got = checker(feed)
    assert list(got) == list(want)
    for k in want:
        assert type(got[k]) is type(want[k])
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].dtype == want[k].dtype


def test_feed_checker_defaults_and_non_dict_mappings():
    declared = _declared()
    w = np.full(2, 7, np.float32)
    checker = FeedChecker(declared, {"w": w})
    feed = {"x": GOOD["x"], "s": GOOD["s"]}
    assert checker(feed)["w"] is w
    assert checker(types.MappingProxyType(feed))["w"] is w
    assert checker(feed)["x"] is GOOD["x"]  # accepted as is, not copied
    with pytest.raises(InvalidFeedError, match="must be a dict"):
        checker([("x", GOOD["x"])])


def test_debug_logging_names_each_node(monkeypatch, caplog):
    nodes = [helper.make_node("RecordOpt", ["x"], ["y"], name="first", domain=D)]
    m = make_model(
        nodes, [tensor_info("x", shape=[1])], [tensor_info("y")], extra_opsets=[TEST_OPSET]
    )
    s = onnxexec.InferenceSession(m.SerializeToString())
    monkeypatch.setenv("ONNXEXEC_DEBUG", "2")
    with caplog.at_level(logging.DEBUG, logger="onnxexec"):
        s.run(None, {"x": np.zeros(1, np.float32)})
    assert any("first" in r.getMessage() and "float32[1]" in r.getMessage() for r in caplog.records)
