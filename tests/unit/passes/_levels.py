"""Run one ONNX model at every optimization level (the regression tests' oracle is
level 0, numpy float64 or onnxruntime; the fused levels must agree with it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from onnxexec.runtime.options import SessionOptions
from onnxexec.runtime.session import InferenceSession

LEVELS = (0, 1, 2, 99)
F = TensorProto.FLOAT


def model(
    nodes: list,
    inputs: Sequence[tuple[str, Sequence[Any]]],
    outputs: Sequence[str | tuple[str, int]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> ModelProto:
    """A model of float32 inputs (name, shape); an output is a name (float32) or (name, type)."""
    outs = [(o, F) if isinstance(o, str) else o for o in outputs]
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(n, F, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outs],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def session(m: ModelProto, level: int) -> InferenceSession:
    o = SessionOptions()
    o.graph_optimization_level = level  # type: ignore[assignment]
    return InferenceSession(m.SerializeToString(), o)


def run_levels(
    m: ModelProto, feeds: dict[str, np.ndarray], levels: Sequence[int] = LEVELS
) -> dict[int, list[np.ndarray]]:
    return {lv: session(m, lv).run(None, feeds) for lv in levels}


def fused_ops(m: ModelProto, level: int = 99) -> list[str]:
    return [n.op_type for n in session(m, level).optimized_graph.nodes]
