"""Shared builders for the ai.onnx.ml op tests: one-node models, an onnxruntime
oracle run next to onnxexec, and the comparison both files use."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxexec.runtime.session import InferenceSession

ML = "ai.onnx.ml"


def _model(op: str, ins: list, outs: list, ml_opset: int = 3, **attrs: Any) -> bytes:
    node = helper.make_node(op, [i.name for i in ins], [o.name for o in outs], domain=ML, **attrs)
    g = helper.make_graph([node], "g", ins, outs)
    m = helper.make_model(
        g,
        opset_imports=[
            helper.make_opsetid("", 21 if ml_opset >= 5 else 17),
            helper.make_opsetid(ML, ml_opset),
        ],
    )
    m.ir_version = 10 if ml_opset >= 5 else 8
    return m.SerializeToString()


def _both(model: bytes, feeds: dict) -> tuple[list, list]:
    """(onnxruntime's outputs, ours from a second run). The first run of a session
    builds the per-node prepared state of the tree ensembles; the second uses it and
    must give the same bits."""
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = InferenceSession(model)
    first = sess.run(None, feeds)
    again = sess.run(None, feeds)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)  # bit-equal (NaN where NaN)
    return ref, again


def _assert_same(ref: list, out: list) -> None:
    assert len(ref) == len(out)
    for r, o in zip(ref, out, strict=True):
        assert o.shape == r.shape and o.dtype == r.dtype
        if r.dtype.kind == "f":
            np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(o, r)


def _ti(name: str, elem: int = T.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, None)
