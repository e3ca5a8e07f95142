"""Device, memory-info and allocator records with onnxruntime's values."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import onnxexec
import onnxexec.runtime.devices
from tests.unit.api import models

ENUMS = [
    "OrtDeviceVendorId", "OrtMemType", "OrtAllocatorType", "OrtDeviceMemoryType",
    "OrtMemoryInfoDeviceType", "OrtSparseFormat", "ExecutionOrder", "GraphOptimizationLevel",
    "ExecutionMode",
]  # fmt: skip


@pytest.mark.parametrize("name", ENUMS)
def test_enum_values_are_onnxruntimes(name):
    theirs = {k: int(v) for k, v in getattr(ort, name).__members__.items()}
    ours = {k: int(v) for k, v in getattr(onnxexec, name).__members__.items()}
    assert ours == theirs


def test_ort_device_and_memory_info():
    for name in ("cpu", "cuda"):
        ours, theirs = onnxexec.OrtDevice.make(name, 0), ort.OrtDevice.make(name, 0)
        assert ours.device_type() == theirs.device_type()
        assert ours.device_vendor_id() == theirs.device_vendor_id()
        assert (ours.device_id(), ours.device_mem_type()) == (
            theirs.device_id(),
            theirs.device_mem_type(),
        )
    ours, theirs = (
        mod.OrtMemoryInfo(
            "Cpu", mod.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, mod.OrtMemType.DEFAULT
        )
        for mod in (onnxexec, ort)
    )
    assert ours.name == theirs.name
    for f in ("device_id", "mem_type", "allocator_type", "device_mem_type", "device_vendor_id"):
        assert int(getattr(ours, f)) == int(getattr(theirs, f)), f
    v2 = onnxexec.OrtMemoryInfo.create_v2("T", 0, 0, 0, 0, 128, 1)
    assert v2.name == "T" and v2.allocator_type == onnxexec.OrtAllocatorType.ORT_ARENA_ALLOCATOR


def test_arena_cfg_and_allocator_registration():
    for args in [(8, 0, 4, 2), ({"max_mem": 16, "initial_growth_chunk_size_bytes": 2},)]:
        ours, theirs = onnxexec.OrtArenaCfg(*args), ort.OrtArenaCfg(*args)
        for f in onnxexec.runtime.devices._ARENA_KEYS:
            assert getattr(ours, f) == getattr(theirs, f), f
    with pytest.raises(RuntimeError):
        onnxexec.OrtArenaCfg({"no_such_key": 1})
    onnxexec.create_and_register_allocator(onnxexec.OrtMemoryInfo("Cpu", 1, 0, 0), None)
    so = onnxexec.SessionOptions()
    so.add_session_config_entry("session.use_env_allocators", "1")
    s = onnxexec.InferenceSession(models.mul().SerializeToString(), so)
    np.testing.assert_array_equal(s.run(None, {"X": np.ones((3, 2), np.float32)})[0], models.W)


def test_ortvaluevector():
    vec = onnxexec.OrtValueVector()
    vec.reserve(2)
    vec.push_back(onnxexec.OrtValue.ortvalue_from_numpy(np.array([True, False])))
    vec.push_back(onnxexec.OrtValue.ortvalue_from_numpy(np.arange(3, dtype=np.int32)))
    assert len(vec) == 2 and vec.bool_tensor_indices() == [0]
    assert vec.element_type_at(1) == 6 and vec.numpy_at(1).tolist() == [0, 1, 2]
    assert [np.from_dlpack(v).tolist() for v in vec] == [[True, False], [0, 1, 2]]
