"""ONNX loader inputs the fuzzer turned into raw exceptions (issue 20)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnxexec import InferenceSession
from onnxexec.errors import ModelLoadError


def _external_model(tmp_path: Path, **fields: str) -> Path:
    (tmp_path / "w.bin").write_bytes(np.arange(16, dtype=np.float32).tobytes())
    t = T(name="w", data_type=T.FLOAT, dims=[3, 4], data_location=T.EXTERNAL)
    for k, v in {"location": "w.bin", **fields}.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    g = h.make_graph(
        [h.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
        [t],
    )
    p = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), p)
    return p


def test_external_data_reads_when_well_formed(tmp_path: Path) -> None:
    sess = InferenceSession(_external_model(tmp_path, offset="16"))
    (y,) = sess.run(None, {"x": np.eye(2, 3, dtype=np.float32)})
    w = np.arange(4, 16, dtype=np.float64).reshape(3, 4)  # floats 4.. from byte 16
    np.testing.assert_array_equal(y, np.eye(2, 3) @ w)


@pytest.mark.parametrize(("key", "value"), [("offset", "abc"), ("length", "1e3"), ("offset", "")])
def test_external_data_fields_that_are_not_integers(tmp_path: Path, key: str, value: str) -> None:
    # used to be "ValueError: invalid literal for int() with base 10: 'abc'"
    with pytest.raises(ModelLoadError, match=r"tensor 'w': cannot be read \(ValueError"):
        InferenceSession(_external_model(tmp_path, **{key: value}))


@pytest.mark.parametrize("elem", [0, 99])
def test_graph_input_of_unknown_element_type(elem: int) -> None:
    # used to be "ValueError: unknown ONNX element type" from the feed checker
    g = h.make_graph(
        [h.make_node("Identity", ["x"], ["y"])],
        "g",
        [h.make_tensor_value_info("x", elem, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, [2])],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(
        ModelLoadError, match=f"graph input 'x' has unknown tensor element type {elem}"
    ):
        InferenceSession(m.SerializeToString())


def test_op_type_that_is_not_utf8() -> None:
    # protobuf returns such a string field as bytes: planning then failed sorting
    # bytes against str (TypeError) instead of naming the node
    g = h.make_graph(
        [h.make_node("Identity", ["x"], ["y"])],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, [2])],
    )
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    bad = data.replace(b"Identity", b"Ident\xe3ty")
    with pytest.raises(ModelLoadError, match="must be UTF-8 strings"):
        InferenceSession(bad)


@pytest.mark.parametrize("version", [-1, 2**31, 2**40])
def test_opset_version_out_of_range(version: int) -> None:
    # 2^40 reached onnx's get_schema (a C int) as a TypeError
    g = h.make_graph(
        [h.make_node("Identity", ["x"], ["y"])],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2])],
        [h.make_tensor_value_info("y", T.FLOAT, [2])],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.opset_import[0].version = version
    with pytest.raises(ModelLoadError, match=f"domain 'ai.onnx' has version {version}"):
        InferenceSession(m.SerializeToString())
