"""Builders for small hand-made ONNX models used across unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def tensor_info(name: str, elem: int = TensorProto.FLOAT, shape: Sequence[Any] | None = None):
    return helper.make_tensor_value_info(name, elem, shape)


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: list,
    outputs: list,
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    **kwargs: Any,
) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    g = helper.make_graph(nodes, "test", inputs, outputs, inits)
    opsets = [helper.make_opsetid("", opset), *kwargs.pop("extra_opsets", [])]
    return helper.make_model(g, opset_imports=opsets, **kwargs)
