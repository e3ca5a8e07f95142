"""Run one ONNX node through onnxexec (and optionally onnxruntime) at a pinned opset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.runtime.session import InferenceSession


def node_model(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    opset: int = 21,
    domain: str = "",
    **attrs: Any,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model whose non-None inputs are graph inputs; returns (model, feeds)."""
    names, infos, feeds = [], [], {}
    for i, x in enumerate(inputs):
        if x is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        x = np.asarray(x)
        infos.append(helper.make_tensor_value_info(name, onnx_dtype(x.dtype), x.shape))
        feeds[name] = x
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "node", infos, [helper.make_empty_tensor_value_info(o) for o in outs]
    )
    opsets = [helper.make_opsetid(domain, opset)]
    if domain:
        opsets.append(helper.make_opsetid("", 21))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8 if opset <= 18 else 10
    return model, feeds


def run_node(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    opset: int = 21,
    **attrs: Any,
) -> list[np.ndarray]:
    """Outputs of one `op_type` node run by onnxexec at `opset`."""
    model, feeds = node_model(op_type, inputs, n_outputs, opset, **attrs)
    return InferenceSession(model).run(None, feeds)


def run_ort(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    opset: int = 21,
    **attrs: Any,
) -> list[np.ndarray]:
    """The same node run by onnxruntime, as an independent reference."""
    ort = pytest.importorskip("onnxruntime")

    model, feeds = node_model(op_type, inputs, n_outputs, opset, **attrs)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
