"""LoRA adapter files: onnxruntime reads ours, we read onnxruntime's, runs agree."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import onnxexec
from tests.unit.helpers import tensor_info

A = np.array([3, 4, 5, 6], np.float32).reshape(4, 1)
B = np.array([7, 8, 9, 10], np.float32).reshape(1, 4)


def _lora_model() -> bytes:
    """output = x @ w + (x @ a) @ b, with a (4, 0) and b (0, 4) defaults (inputs too)."""
    g = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("MatMul", ["x", "a"], ["xa"]),
            helper.make_node("MatMul", ["xa", "b"], ["xab"]),
            helper.make_node("Add", ["xw", "xab"], ["y"]),
        ],
        "lora",
        [
            tensor_info("x", shape=[4, 4]),
            tensor_info("a", shape=[4, "r"]),
            tensor_info("b", shape=["r", 4]),
        ],
        [tensor_info("y", shape=[4, 4])],
        [
            helper.make_tensor("w", 1, [4, 4], np.arange(1, 17, dtype=np.float32)),
            helper.make_tensor("a", 1, [4, 0], []),
            helper.make_tensor("b", 1, [0, 4], []),
        ],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _write(mod, path, params):
    f = mod.AdapterFormat()
    f.set_adapter_version(2)
    f.set_model_version(3)
    f.set_parameters({k: mod.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
    f.export_adapter(str(path))


def test_adapter_files_are_interchangeable(tmp_path):
    params = {"a": A, "b": B, "ints": np.arange(10, dtype=np.int64).reshape(2, 5)}
    for writer, reader in [(onnxexec, ort), (ort, onnxexec), (onnxexec, onnxexec)]:
        path = tmp_path / f"{writer.__name__}.onnx_adapter"
        _write(writer, path, params)
        got = reader.AdapterFormat.read_adapter(str(path))
        assert (got.get_adapter_version(), got.get_model_version()) == (2, 3)
        values = got.get_parameters()
        assert sorted(values) == sorted(params)
        for k, v in params.items():
            assert values[k].numpy().dtype == v.dtype
            np.testing.assert_array_equal(values[k].numpy(), v)


def test_active_adapter_feeds_its_parameters(tmp_path):
    path = tmp_path / "lora.onnx_adapter"
    _write(ort, path, {"a": A, "b": B})
    x = {"x": np.ones((4, 4), np.float32)}
    results = []
    for mod in (ort, onnxexec):
        adapter = mod.LoraAdapter()
        adapter.Load(str(path))
        ro = mod.RunOptions()
        ro.add_active_adapter(adapter)
        s = mod.InferenceSession(_lora_model())
        results.append((s.run(None, x)[0], s.run(None, x, ro)[0]))
    (base_t, lora_t), (base_o, lora_o) = results
    np.testing.assert_array_equal(base_o, base_t)
    np.testing.assert_array_equal(lora_o, lora_t)
    w = np.arange(1, 17, dtype=np.float64).reshape(4, 4)
    np.testing.assert_array_equal(lora_o, np.ones((4, 4)) @ w + np.ones((4, 4)) @ A @ B)


def test_not_an_adapter_file(tmp_path):
    p = tmp_path / "x.onnx_adapter"
    p.write_bytes(b"\0" * 16)
    with pytest.raises(onnxexec.ModelLoadError, match="TORT"):
        onnxexec.AdapterFormat.read_adapter(str(p))
