"""ir/onnx_pb.py: onnx's message classes without importing onnx, the same classes
onnx exposes whichever is imported first, and models that load and run with neither
onnx nor ml_dtypes imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxexec.ir.onnx_pb import TEXT_SUFFIXES, ModelProto
from onnxexec.loaders.tensors import tensor_to_array

RUN = textwrap.dedent(
    """
    import sys
    import numpy as np
    from onnxexec import InferenceSession

    s = InferenceSession(sys.argv[1])
    (y,) = s.run(None, {"x": np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)})
    print(y.tolist(), "onnx" in sys.modules, "ml_dtypes" in sys.modules)
    import onnx  # the real package afterwards: one set of classes
    from onnxexec.ir import onnx_pb
    print(onnx.ModelProto is onnx_pb.ModelProto, onnx.TensorProto is onnx_pb.TensorProto)
    """
)


def _model(path: Path) -> None:
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 4])  # int64_data
    w = numpy_helper.from_array(np.array([2.0, 2.0, 2.0, 2.0], np.float32), "w")  # raw
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Mul", ["r", "w"], ["m"]),
        helper.make_node("Cast", ["m"], ["c"], to=TensorProto.INT32),
        helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [shape, w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_model_runs_without_importing_onnx_or_ml_dtypes(tmp_path: Path) -> None:
    _model(tmp_path / "m.onnx")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path / "m.onnx")],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert out == ["[[2.0, -4.0, 6.0, 8.0]] False False", "True True"]


def test_classes_are_onnxs_when_onnx_came_first() -> None:
    assert ModelProto is onnx.ModelProto


@pytest.mark.parametrize(
    "tensor",
    [
        helper.make_tensor("f", TensorProto.FLOAT, [2, 3], np.arange(6, dtype=np.float32)),
        helper.make_tensor("d", TensorProto.DOUBLE, [3], [1.5, -2.0, 3.25]),
        helper.make_tensor("i", TensorProto.INT64, [2, 2], [1, -2, 3, 1 << 40]),
        helper.make_tensor("i32", TensorProto.INT32, [3], [7, -8, 9]),
        helper.make_tensor("i8", TensorProto.INT8, [3], [-128, 0, 127]),
        helper.make_tensor("u16", TensorProto.UINT16, [2], [0, 65535]),
        helper.make_tensor("b", TensorProto.BOOL, [3], [True, False, True]),
        helper.make_tensor("u32", TensorProto.UINT32, [2], [0, (1 << 32) - 1]),
        helper.make_tensor("u64", TensorProto.UINT64, [1], [(1 << 64) - 1]),
        helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([1.5, -2], np.float16)),
        helper.make_tensor("s", TensorProto.FLOAT, [], [4.0]),
        helper.make_tensor("e", TensorProto.FLOAT, [0, 3], []),
        numpy_helper.from_array(np.arange(12, dtype=np.int16).reshape(3, 4), "raw16"),
        numpy_helper.from_array(np.array([[1.0, 2.0]], np.float64), "rawf64"),
    ],
    ids=lambda t: t.name,
)
def test_tensor_to_array_matches_numpy_helper(tensor: TensorProto) -> None:
    got = tensor_to_array(tensor)
    want = numpy_helper.to_array(tensor)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_text_suffixes_match_onnx_serialization_registry() -> None:
    registry = onnx.serialization.registry
    text = set()
    for fmt in ("textproto", "json", "onnxtxt"):
        text |= set(registry.get(fmt).file_extensions)
    assert text == TEXT_SUFFIXES
