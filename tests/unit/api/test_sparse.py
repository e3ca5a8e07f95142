"""SparseTensor (COO, CSR) on the CPU, against onnxruntime's accessors."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import onnxexec
from onnxexec.runtime.devices import OrtDevice, OrtSparseFormat

SHAPE = [3, 4]
VALUES = np.array([1.0, 2.0, 3.0], np.float32)


def test_coo_matches_onnxruntime_and_dense():
    idx = np.array([1, 6, 11], np.int64)  # linear indices
    ours = onnxexec.SparseTensor.sparse_coo_from_numpy(SHAPE, VALUES, idx, OrtDevice.make("cpu", 0))
    theirs = ort.SparseTensor.sparse_coo_from_numpy(
        SHAPE, VALUES, idx, ort.OrtDevice.make("cpu", 0)
    )
    assert int(ours.format()) == int(theirs.format()) == int(OrtSparseFormat.ORT_SPARSE_COO)
    assert ours.dense_shape() == theirs.dense_shape() == SHAPE
    assert ours.data_type() == theirs.data_type() == "sparse_tensor(float)"
    np.testing.assert_array_equal(ours.values(), theirs.values())
    np.testing.assert_array_equal(ours.as_coo_view().indices(), theirs.as_coo_view().indices())
    assert not ours.values().flags.writeable and not ours.as_coo_view().indices().flags.writeable
    dense = np.zeros(12, np.float32)
    dense[idx] = VALUES
    np.testing.assert_array_equal(ours.to_dense(), dense.reshape(SHAPE))
    v = onnxexec.OrtValue.ort_value_from_sparse_tensor(ours)
    assert v.is_sparse_tensor() and v.as_sparse_tensor() is ours
    with pytest.raises(RuntimeError):
        ours.to_cuda(OrtDevice.make("cuda", 0))


def test_csr_and_strings():
    inner = np.array([0, 3, 1], np.int64)
    outer = np.array([0, 2, 2, 3], np.int64)
    ours = onnxexec.SparseTensor.sparse_csr_from_numpy(SHAPE, VALUES, inner, outer)
    assert ours.format() == OrtSparseFormat.ORT_SPARSE_CSRC
    np.testing.assert_array_equal(ours.as_csrc_view().outer(), outer)
    expected = np.zeros(SHAPE, np.float32)
    expected[0, 0], expected[0, 3], expected[2, 1] = VALUES
    np.testing.assert_array_equal(ours.to_dense(), expected)
    s = onnxexec.SparseTensor.sparse_coo_from_numpy(
        SHAPE, np.array(["a", "b", "c"]), np.array([0, 1, 2])
    )
    assert s.data_type() == "sparse_tensor(string)" and list(s.values()) == ["a", "b", "c"]
    with pytest.raises(onnxexec.capi.onnxruntime_pybind11_state.InvalidArgument):
        onnxexec.SparseTensor.sparse_csr_from_numpy(SHAPE, VALUES, inner, outer[:2])
