"""Helpers for pass tests: build small graphs with onnx.helper, run them, compare."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from onnxexec.ir.graph import Graph
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.runtime.executor import execute
from onnxexec.runtime.plan import plan_graph

F = TensorProto.FLOAT
node = helper.make_node


def graph(
    nodes: list,
    inputs: Sequence[tuple[str, Sequence[Any]]],
    outputs: Sequence[str],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    elem: int = F,
) -> Graph:
    """An IR graph from onnx.helper nodes; inputs are (name, shape) of `elem` tensors."""
    from onnx import numpy_helper

    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(n, elem, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(n, elem, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return load_onnx(m)


def run(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return execute(plan_graph(g), feeds)


def ops(g: Graph) -> list[str]:
    return [n.op_type for n in g.nodes]


def assert_same_outputs(
    a: Graph, b: Graph, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6
) -> None:
    for x, y in zip(run(a, feeds), run(b, feeds), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol)


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


Pass = Callable[[Graph], Graph]
