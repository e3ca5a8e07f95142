"""SparseTensor in COO and CSR(C) form on the CPU, as onnxruntime's Python API has it.

Views handed out (values, indices) are read-only, like onnxruntime's, and keep their
tensor alive through numpy's base chain. COO indices are linear (one per value) or
(N, rank) coordinates; CSR has inner (column) indices and outer (row start) offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from onnxexec.errors import ConfigError, InvalidArgument
from onnxexec.ir.dtypes import type_name
from onnxexec.runtime.devices import OrtDevice, OrtSparseFormat
from onnxexec.runtime.ortvalue import elem_type_of


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def _on_cpu(device: Any) -> None:
    if device is not None and getattr(device, "name", "cpu") != "cpu":
        raise ConfigError("onnxexec places sparse tensors on the CPU only")


class SparseCooView:
    def __init__(self, indices: np.ndarray) -> None:
        self._indices = indices

    def indices(self) -> np.ndarray:
        return _readonly(self._indices)


class SparseCsrView:
    def __init__(self, inner: np.ndarray, outer: np.ndarray) -> None:
        self._inner, self._outer = inner, outer

    def inner(self) -> np.ndarray:
        return _readonly(self._inner)

    def outer(self) -> np.ndarray:
        return _readonly(self._outer)


class SparseTensor:
    """A sparse tensor: dense shape, values and the format's index arrays."""

    def __init__(
        self,
        fmt: OrtSparseFormat,
        dense_shape: Sequence[int],
        values: np.ndarray,
        indices: tuple[np.ndarray, ...],
    ) -> None:
        self._format = fmt
        self._shape = [int(d) for d in dense_shape]
        if values.dtype.kind in "US":
            values = values.astype(object)
        self._values = values
        self._indices = indices

    @staticmethod
    def sparse_coo_from_numpy(
        dense_shape: Sequence[int],
        values: np.ndarray,
        coo_indices: np.ndarray,
        ort_device: OrtDevice | None = None,
    ) -> SparseTensor:
        _on_cpu(ort_device)
        values, idx = np.asarray(values), np.asarray(coo_indices, dtype=np.int64)
        if idx.ndim == 1 and idx.size != values.size:
            raise InvalidArgument(f"COO: {idx.size} linear indices for {values.size} values")
        if idx.ndim == 2 and idx.shape != (values.size, len(dense_shape)):
            raise InvalidArgument(f"COO: index shape {idx.shape} for {values.size} values")
        return SparseTensor(OrtSparseFormat.ORT_SPARSE_COO, dense_shape, values, (idx,))

    @staticmethod
    def sparse_csr_from_numpy(
        dense_shape: Sequence[int],
        values: np.ndarray,
        inner_indices: np.ndarray,
        outer_indices: np.ndarray,
        ort_device: OrtDevice | None = None,
    ) -> SparseTensor:
        _on_cpu(ort_device)
        if len(dense_shape) != 2:
            raise InvalidArgument(f"CSR needs a 2-D dense shape, got {list(dense_shape)}")
        values = np.asarray(values)
        inner = np.asarray(inner_indices, dtype=np.int64)
        outer = np.asarray(outer_indices, dtype=np.int64)
        if inner.size != values.size or outer.size != int(dense_shape[0]) + 1:
            raise InvalidArgument(
                f"CSR: {inner.size} inner indices and {outer.size} outer offsets for "
                f"{values.size} values in {int(dense_shape[0])} rows"
            )
        return SparseTensor(OrtSparseFormat.ORT_SPARSE_CSRC, dense_shape, values, (inner, outer))

    def format(self) -> OrtSparseFormat:
        return self._format

    def dense_shape(self) -> list[int]:
        return list(self._shape)

    def data_type(self) -> str:
        return f"sparse_tensor({type_name(elem_type_of(self._values))})"

    def device_name(self) -> str:
        return "cpu"

    def values(self) -> np.ndarray:
        return _readonly(self._values)

    def as_coo_view(self) -> SparseCooView:
        if self._format != OrtSparseFormat.ORT_SPARSE_COO:
            raise InvalidArgument("this sparse tensor is not in COO format")
        return SparseCooView(self._indices[0])

    def as_csrc_view(self) -> SparseCsrView:
        if self._format != OrtSparseFormat.ORT_SPARSE_CSRC:
            raise InvalidArgument("this sparse tensor is not in CSR format")
        return SparseCsrView(*self._indices)

    def to_cuda(self, ort_device: OrtDevice) -> SparseTensor:
        raise ConfigError("CUDA is not available: onnxexec runs on the CPU only")

    def to_dense(self) -> np.ndarray:
        """The dense array (zeros, or empty strings, where no value is stored)."""
        fill: Any = "" if self._values.dtype == object else 0
        out = np.full(self._shape, fill, dtype=self._values.dtype)
        if self._format == OrtSparseFormat.ORT_SPARSE_COO:
            idx = self._indices[0]
            flat = idx if idx.ndim == 1 else np.ravel_multi_index(tuple(idx.T), self._shape)
            out.reshape(-1)[flat] = self._values
        else:
            inner, outer = self._indices
            rows = np.repeat(np.arange(self._shape[0]), np.diff(outer))
            out[rows, inner] = self._values
        return out
