"""Small models for the onnxruntime-API tests, each run on onnxexec and on onnxruntime."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.unit.helpers import make_model, tensor_info

W = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)


def mul(tmp_path: Path | None = None, **kwargs: object) -> onnx.ModelProto | str:
    """Y = X * W, X float[3, 2], W an initializer (onnxruntime's mul_1.onnx)."""
    m = make_model(
        [helper.make_node("Mul", ["X", "W"], ["Y"], name="mul_1")],
        [tensor_info("X", shape=[3, 2])],
        [tensor_info("Y", shape=[3, 2])],
        {"W": W},
        **kwargs,
    )
    if tmp_path is None:
        return m
    path = tmp_path / "mul.onnx"
    onnx.save(m, path)
    return str(path)


def chain(n: int) -> onnx.ModelProto:
    """x float[4] -> n Neg nodes -> y (a graph with many node boundaries)."""
    names = ["x", *(f"t{i}" for i in range(n - 1)), "y"]
    nodes = [
        helper.make_node("Neg", [a], [b], name=f"neg{i}")
        for i, (a, b) in enumerate(itertools.pairwise(names))
    ]
    return make_model(nodes, [tensor_info("x", shape=[4])], [tensor_info("y", shape=[4])])


def identity(elem: int, shape: list) -> onnx.ModelProto:
    return make_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [tensor_info("x", elem, shape)],
        [tensor_info("y", elem, shape)],
    )


def add_mul_add() -> onnx.ModelProto:
    """C = (A + B) * B + A with named nodes add_0, mul_0, add_1."""
    return make_model(
        [
            helper.make_node("Add", ["A", "B"], ["s"], name="add_0"),
            helper.make_node("Mul", ["s", "B"], ["p"], name="mul_0"),
            helper.make_node("Add", ["p", "A"], ["C"], name="add_1"),
        ],
        [tensor_info("A", shape=[3, 2]), tensor_info("B", shape=[3, 2])],
        [tensor_info("C", shape=[3, 2])],
    )


def free_dims() -> onnx.ModelProto:
    """Abs over x[Dim1 (DATA_BATCH), Dim2 (DATA_CHANNEL), 5]."""
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, ["Dim1", "Dim2", 5])
    t.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    t.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    x, y = helper.make_value_info("x", t), helper.make_value_info("y", t)
    return make_model([helper.make_node("Abs", ["x"], ["y"])], [x], [y])
