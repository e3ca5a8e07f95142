"""One com.microsoft node run by onnxexec and by onnxruntime (the oracle)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.runtime.session import InferenceSession

MS = "com.microsoft"


def ms_model(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    n_feeds: int = 1,
    **attrs: Any,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The first `n_feeds` inputs are graph inputs, the rest initializers (onnxruntime
    wants constant scales and weights for several of these kernels)."""
    names, infos, inits, feeds = [], [], [], {}
    for i, x in enumerate(inputs):
        if x is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        x = np.asarray(x)
        if i < n_feeds:
            infos.append(helper.make_tensor_value_info(name, onnx_dtype(x.dtype), x.shape))
            feeds[name] = x
        else:
            inits.append(numpy_helper.from_array(x, name))
    while names and names[-1] == "":
        names.pop()
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=MS, **attrs)
    graph = helper.make_graph(
        [node], "node", infos, [helper.make_empty_tensor_value_info(o) for o in outs], inits
    )
    opsets = [helper.make_opsetid(MS, 1), helper.make_opsetid("", 21)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model, feeds


def ours_and_ort(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    n_outputs: int = 1,
    n_feeds: int = 1,
    **attrs: Any,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(onnxexec outputs, onnxruntime outputs) of the same one-node model."""
    ort = pytest.importorskip("onnxruntime")
    model, feeds = ms_model(op_type, inputs, n_outputs, n_feeds, **attrs)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1  # DynamicQuantizeLSTM depends on it: see quant_rnn.py
    ref = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = ref.run(None, feeds)
    got = InferenceSession(model).run(None, feeds)
    return got, want


def assert_within_one_step(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype and shape, integer codes at most 1 apart (one quantization step)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max(initial=0) <= 1, f"max code difference {diff.max()}"
