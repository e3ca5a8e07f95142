"""ONNXEXEC_CHECK_SHAPES=1: the executor asserts inferred shape / dtype == produced."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxexec.errors import NodeExecutionError
from onnxexec.passes.shape_inference import RULES, Facts
from onnxexec.runtime import shape_check
from tests.unit.passes._levels import LEVELS, model, session

node = helper.make_node


def _model():
    rng = np.random.default_rng(0)
    return model(
        [
            node("Add", ["b", "x"], ["u"]),
            node("Relu", ["u"], ["r"]),
            node("Shape", ["r"], ["s"]),
            node("Gather", ["s", "one"], ["t"], axis=0),
            node("Reshape", ["r", "flat"], ["y"]),
        ],
        [("x", [1, "seq", 56])],
        ["y", ("t", TensorProto.INT64)],
        {
            "b": rng.standard_normal(56).astype(np.float32),
            "one": np.array(1, np.int64),
            "flat": np.array([-1, 8], np.int64),
        },
    )


@pytest.fixture
def checking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shape_check.ENV, "1")


def test_correct_rules_pass_at_every_level(checking: None) -> None:
    x = np.ones((1, 23, 56), np.float32)
    for lv in LEVELS:
        y, t = session(_model(), lv).run(None, {"x": x})
        assert y.shape == (161, 8) and int(t) == 23


def test_wrong_shape_rule_is_caught(checking: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # the rule FusedElementwise had: the first input's shape, ignoring broadcasting
    monkeypatch.setitem(
        RULES, ("onnxexec", "FusedElementwise"), lambda n, ins: [Facts(ins[0].elem, ins[0].shape)]
    )
    with pytest.raises(NodeExecutionError, match=r"ShapeCheckError.*inferred shape \[56\]"):
        session(_model(), 2).run(None, {"x": np.ones((1, 23, 56), np.float32)})


def test_wrong_element_type_is_caught(checking: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        RULES, ("", "Relu"), lambda n, ins: [Facts(TensorProto.DOUBLE, ins[0].shape)]
    )
    with pytest.raises(NodeExecutionError, match=r"value 'r': inferred element type 11"):
        session(_model(), 0).run(None, {"x": np.ones((1, 23, 56), np.float32)})


def test_symbols_bind_once_per_run(checking: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Relu claimed (1, seq, seq): seq is bound to 23 by x, so 56 is a mismatch
    monkeypatch.setitem(RULES, ("", "Relu"), lambda n, ins: [Facts(ins[0].elem, (1, "seq", "seq"))])
    with pytest.raises(NodeExecutionError, match=r"inferred shape \[1, 'seq', 'seq'\]"):
        session(_model(), 0).run(None, {"x": np.ones((1, 23, 56), np.float32)})


def test_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(shape_check.ENV, raising=False)
    monkeypatch.setitem(
        RULES, ("", "Relu"), lambda n, ins: [Facts(TensorProto.DOUBLE, ins[0].shape)]
    )
    session(_model(), 0).run(None, {"x": np.ones((1, 23, 56), np.float32)})
