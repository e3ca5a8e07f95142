from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxexec.errors import ModelLoadError
from onnxexec.ir.graph import Graph
from onnxexec.ir.types import SequenceType, TensorType
from onnxexec.loaders.onnx_proto import load_onnx
from tests.unit.helpers import make_model, tensor_info


def _external_model(tmp_path, location: str, offset: int = 0, length: int | None = None):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = numpy_helper.from_array(w, "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [], [tensor_info("y", shape=[2, 3])], [t]
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    path.write_bytes(m.SerializeToString())
    return path, w


def test_external_data_is_memory_mapped(tmp_path):
    path, w = _external_model(tmp_path, "weights.bin", offset=8)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 8 + w.tobytes())
    g = load_onnx(path)
    arr = g.initializers["w"]
    assert isinstance(arr, np.memmap)
    np.testing.assert_array_equal(arr, w)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin"])
def test_external_data_outside_model_folder_is_refused(tmp_path, location):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    path, _ = _external_model(model_dir, location)
    with pytest.raises(ModelLoadError, match=r"absolute|escapes"):
        load_onnx(path)


def test_external_data_symlink_escaping_folder_is_refused(tmp_path):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    (model_dir / "link.bin").symlink_to(tmp_path / "outside.bin")
    path, _ = _external_model(model_dir, "link.bin")
    with pytest.raises(ModelLoadError, match="escapes"):
        load_onnx(path)


def test_external_data_past_end_of_file_is_refused(tmp_path):
    path, w = _external_model(tmp_path, "weights.bin", offset=4)
    (tmp_path / "weights.bin").write_bytes(w.tobytes())  # 24 bytes; 4 + 24 > 24
    with pytest.raises(ModelLoadError, match="runs past the end"):
        load_onnx(path)


def test_external_data_from_bytes_needs_a_folder(tmp_path):
    path, _ = _external_model(tmp_path, "weights.bin")
    with pytest.raises(ModelLoadError, match="given as bytes"):
        load_onnx(path.read_bytes())


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        load_onnx(tmp_path / "nope.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xfe not protobuf \x00\x01")
    with pytest.raises(ModelLoadError, match="not an ONNX model"):
        load_onnx(bad)


def test_attributes_types_and_subgraphs_are_converted():
    body = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "body", [], [tensor_info("y")]
    )
    node = helper.make_node(
        "Custom",
        ["x"],
        ["y"],
        domain="ai.onnx",
        f=1.5,
        i=3,
        s="abc",
        ints=[1, 2],
        floats=[0.5],
        strings=["a", "b"],
        t=numpy_helper.from_array(np.ones(2, np.int64)),
        g=body,
    )
    seq_in = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    m = make_model([node], [tensor_info("x", shape=["N", 2]), seq_in], [tensor_info("y")])
    g = load_onnx(m)
    a = g.nodes[0].attrs
    assert a["f"] == 1.5 and a["i"] == 3 and a["s"] == "abc"
    assert a["ints"] == (1, 2) and a["floats"] == (0.5,) and a["strings"] == ("a", "b")
    np.testing.assert_array_equal(a["t"], np.ones(2, np.int64))
    assert isinstance(a["g"], Graph) and a["g"].opset_imports == g.opset_imports
    assert g.nodes[0].domain == ""
    assert g.inputs[0].type == TensorType(TensorProto.FLOAT, ("N", 2))
    assert isinstance(g.inputs[1].type, SequenceType)


def test_sparse_initializer_is_densified():
    values = numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "sp")
    indices = numpy_helper.from_array(np.array([1, 4], np.int64), "sp_idx")
    sparse = helper.make_sparse_tensor(values, indices, [2, 3])
    g = helper.make_graph(
        [helper.make_node("Identity", ["sp"], ["y"])],
        "g",
        [],
        [tensor_info("y")],
        sparse_initializer=[sparse],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    dense = load_onnx(m).initializers["sp"]
    np.testing.assert_array_equal(dense, [[0, 5, 0], [0, 7, 0]])


def test_metadata_is_kept():
    m = make_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [tensor_info("x")],
        [tensor_info("y")],
        producer_name="unit",
        model_version=7,
    )
    onnx.helper.set_model_props(m, {"author": "me"})
    meta = load_onnx(m).metadata
    assert meta["producer_name"] == "unit" and meta["model_version"] == 7
    assert meta["custom_metadata_map"] == {"author": "me"}
