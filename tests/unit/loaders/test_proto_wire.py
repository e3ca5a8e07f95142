"""The loader's direct read of big raw_data (loaders/proto_wire.py) against onnx's own
decoding (numpy_helper.to_array of onnx.load's proto), tensor by tensor."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxexec.errors import ModelLoadError
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.loaders.proto_wire import MIN_CUT, split_model
from tests.unit.helpers import tensor_info


def _tensors() -> list[TensorProto]:
    rng = np.random.default_rng(0)
    big = 2 * MIN_CUT
    ts = [
        numpy_helper.from_array(rng.standard_normal((big // 4, 3)).astype(np.float32), "f32"),
        numpy_helper.from_array(rng.standard_normal(big).astype(np.float16), "f16"),
        numpy_helper.from_array(
            rng.standard_normal(big).astype(np.float32).astype(ml_dtypes.bfloat16), "bf16"
        ),
        numpy_helper.from_array(rng.integers(-9, 9, (3, big)).astype(np.int64), "i64"),
        numpy_helper.from_array(rng.integers(0, 2, big).astype(bool), "flag"),
        numpy_helper.from_array(np.arange(5, dtype=np.float32), "small"),
        helper.make_tensor("strings", TensorProto.STRING, [2], [b"a", b"bc"]),
        helper.make_tensor("ints_field", TensorProto.INT64, [3], [1, 2, 3]),  # int64_data
        helper.make_tensor("empty", TensorProto.FLOAT, [0, 4], []),
    ]
    # int4: two values per byte in raw_data, so the reader must hand it back to onnx.
    packed = b"\x3d" * big + b"\x03"  # low nibble first: -3 (0xd), 3, -3, 3, ..., 3
    ts.append(helper.make_tensor("i4", TensorProto.INT4, [2 * big + 1], packed, raw=True))
    return ts


def _model() -> onnx.ModelProto:
    ts = _tensors()
    nodes = [helper.make_node("Identity", [t.name], [t.name + "_out"]) for t in ts]
    outs = [helper.make_tensor_value_info(t.name + "_out", t.data_type, None) for t in ts]
    sub_w = numpy_helper.from_array(np.full(MIN_CUT, 2.0, np.float32), "sub_w")
    then = helper.make_graph(
        [helper.make_node("Identity", ["sub_w"], ["t"])], "then", [], [tensor_info("t")], [sub_w]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["f32"], ["e"])], "else", [], [tensor_info("e")]
    )
    nodes.append(helper.make_node("If", ["flag0"], ["sel"], then_branch=then, else_branch=other))
    ts.append(numpy_helper.from_array(np.array(True), "flag0"))
    g = helper.make_graph(nodes, "g", [], [*outs, tensor_info("sel")], ts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == object:
        return a.tolist() == b.tolist()
    return a.tobytes() == b.tobytes()


@pytest.mark.parametrize("source", ["path", "bytes"])
def test_every_initializer_equals_onnx_decoding(tmp_path, source):
    m = _model()
    data = m.SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    g = load_onnx(path if source == "path" else data)
    ref = onnx.load_model_from_string(data)
    want = {t.name: numpy_helper.to_array(t) for t in ref.graph.initializer}
    assert list(g.initializers) == list(want)
    for name, w in want.items():
        got = g.initializers[name]
        if name == "strings":
            assert got.tolist() == ["a", "bc"]
            continue
        assert _same(got, w), name
    # The directly read tensors are read-only, as numpy_helper's views of the bytes are.
    assert not g.initializers["f32"].flags.writeable
    sub = g.nodes[-1].attrs["then_branch"]
    np.testing.assert_array_equal(sub.initializers["sub_w"], np.full(MIN_CUT, 2.0, np.float32))


def test_split_model_cuts_only_big_plain_raw_data_and_keeps_the_rest():
    m = _model()
    data = m.SerializeToString()
    small, spans = split_model(memoryview(data))
    assert len(small) < len(data) - 5 * MIN_CUT
    stripped = onnx.ModelProto()
    stripped.ParseFromString(small)
    inits = m.graph.initializer
    cut = {inits[s.index].name for s in spans}
    assert cut == {"f32", "f16", "bf16", "i64", "flag", "i4"}
    for s in spans:
        assert data[s.offset : s.offset + s.length] == inits[s.index].raw_data
        assert not stripped.graph.initializer[s.index].HasField("raw_data")
    # Everything else is byte-for-byte what protobuf parsed from the original.
    for s in spans:
        inits[s.index].ClearField("raw_data")
    assert stripped == m


def test_a_truncated_file_is_still_reported_as_not_a_model(tmp_path):
    data = _model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="not an ONNX model"):
        load_onnx(path)


def test_raw_data_of_the_wrong_size_is_a_load_error(tmp_path):
    t = numpy_helper.from_array(np.zeros(MIN_CUT, np.float32), "w")
    t.dims[:] = [MIN_CUT + 1]  # one element more than the bytes hold
    g = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [], [tensor_info("y")], [t]
    )
    path = tmp_path / "bad.onnx"
    path.write_bytes(helper.make_model(g).SerializeToString())
    with pytest.raises(
        ModelLoadError, match=r"tensor 'w' \(float32, shape \[\d+\]\) has \d+ bytes of raw_data"
    ):
        load_onnx(path)


def test_text_formats_still_load_through_onnx(tmp_path):
    m = _model()
    path = tmp_path / "m.textproto"
    onnx.save(m, str(path), format="textproto")
    g = load_onnx(path)
    np.testing.assert_array_equal(
        g.initializers["f32"], numpy_helper.to_array(m.graph.initializer[0])
    )
