"""OrtValue and OrtValueVector: onnxruntime's value containers, on the CPU.

An OrtValue holds a numpy array (a tensor), a list (a sequence), a dict (a map) or a
SparseTensor. `ortvalue_from_numpy` keeps the caller's array without copying when it
is C-contiguous, as onnxruntime does for CPU memory, so `data_ptr()` and
`np.asarray(v)` see the same bytes. DLPack works both ways through numpy's own
`__dlpack__` / `np.from_dlpack`. One class plays both of onnxruntime's layers (the
Python wrapper and the pybind object): `_ortvalue` and `_get_c_value()` return self.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from onnxexec.errors import ConfigError, InvalidArgument
from onnxexec.ir.dtypes import np_dtype, onnx_dtype, type_name

CPU_DEVICE_TYPE = 1  # DLPack kDLCPU


def _is_string_dtype(dt: np.dtype) -> bool:
    return dt.kind in "OUS"


def elem_type_of(arr: np.ndarray) -> int:
    """The ONNX element type of an array (strings of any numpy kind are STRING)."""
    if _is_string_dtype(arr.dtype):
        return 8
    return onnx_dtype(arr.dtype)


def check_device(device_type: str, device_id: int) -> None:
    if str(device_type).lower() != "cpu":
        raise ConfigError(
            f"device '{device_type}:{device_id}' is not available: onnxexec runs on the CPU only"
        )


class _Capsule:
    """A bare DLPack capsule dressed as a producer, so np.from_dlpack accepts it."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (CPU_DEVICE_TYPE, 0)


class OrtValue:
    """A value (tensor, sequence, map, sparse tensor) as onnxruntime's OrtValue."""

    def __init__(self, value: Any, numpy_obj: Any = None) -> None:
        if isinstance(value, OrtValue):
            value = value._value
        self._value: Any = value
        self._keepalive = numpy_obj  # onnxruntime's second argument keeps the source alive

    # --- construction -------------------------------------------------------------
    @staticmethod
    def ortvalue_from_numpy(
        numpy_obj: Any, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1
    ) -> OrtValue:
        """Wrap `numpy_obj` (no copy when it is C-contiguous and not a string array)."""
        check_device(device_type, device_id)
        arr = np.asarray(numpy_obj)
        if _is_string_dtype(arr.dtype) and arr.dtype.kind != "O":
            arr = arr.astype(object)  # onnxruntime copies strings into std::string tensors
        elif not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return OrtValue(arr, numpy_obj)

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data: np.ndarray, onnx_element_type: int) -> OrtValue:
        """Wrap `data` reinterpreted as ONNX element type `onnx_element_type` (same item size)."""
        want = np_dtype(int(onnx_element_type))
        arr = np.ascontiguousarray(data)
        if arr.dtype != want:
            if arr.dtype.itemsize != want.itemsize:
                raise InvalidArgument(
                    f"element type {type_name(int(onnx_element_type))} needs {want.itemsize}-byte "
                    f"items, the array has {arr.dtype} ({arr.dtype.itemsize} bytes)"
                )
            arr = arr.view(want)
        return OrtValue(arr, data)

    @staticmethod
    def ortvalue_from_shape_and_type(
        shape: Sequence[int],
        element_type: Any,
        device_type: str = "cpu",
        device_id: int = 0,
        vendor_id: int = -1,
    ) -> OrtValue:
        """A new uninitialised tensor; `element_type` is a numpy type or an ONNX type id."""
        check_device(device_type, device_id)
        if isinstance(element_type, int | np.integer) and not isinstance(element_type, bool):
            dt = np_dtype(int(element_type))
        else:
            dt = np.dtype(element_type)
        if dt.kind == "O":
            return OrtValue(np.full(tuple(shape), "", dtype=object))
        return OrtValue(np.empty(tuple(int(d) for d in shape), dtype=dt))

    @staticmethod
    def ort_value_from_sparse_tensor(sparse_tensor: Any) -> OrtValue:
        return OrtValue(sparse_tensor)

    @staticmethod
    def from_dlpack(data: Any, is_bool_tensor: bool | None = None) -> OrtValue:
        """Wrap a DLPack producer or capsule without copying."""
        producer = data if hasattr(data, "__dlpack__") else _Capsule(data)
        arr = np.from_dlpack(producer)
        if is_bool_tensor and arr.dtype == np.uint8:
            arr = arr.view(np.bool_)
        return OrtValue(arr, data)

    # --- inspection ---------------------------------------------------------------
    @property
    def _ortvalue(self) -> OrtValue:
        return self

    def _get_c_value(self) -> OrtValue:
        return self

    def _tensor(self) -> np.ndarray:
        if not isinstance(self._value, np.ndarray):
            raise InvalidArgument(f"the OrtValue holds a {self.data_type()}, not a tensor")
        return self._value

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray)

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def is_sparse_tensor(self) -> bool:
        return type(self._value).__name__ == "SparseTensor"

    def has_value(self) -> bool:
        return self._value is not None

    def device_name(self) -> str:
        return "cpu"

    def shape(self) -> list[int]:
        if self.is_sparse_tensor():
            return list(self._value.dense_shape())
        return list(self._tensor().shape)

    def element_type(self) -> int:
        return elem_type_of(self._tensor())

    def data_type(self) -> str:
        v = self._value
        if isinstance(v, np.ndarray):
            return f"tensor({type_name(elem_type_of(v))})"
        if isinstance(v, list):
            inner = OrtValue(v[0]).data_type() if v else "tensor(float)"
            return f"seq({inner})"
        if self.is_sparse_tensor():
            return str(v.data_type())
        if isinstance(v, dict):
            return "map"
        return "optional"

    def data_ptr(self) -> int:
        return int(self._tensor().ctypes.data)

    def tensor_size_in_bytes(self) -> int:
        return int(self._tensor().nbytes)

    def numpy(self) -> Any:
        """The value: the tensor's array itself (shared, like onnxruntime on CPU)."""
        v = self._value
        if isinstance(v, list):
            return [OrtValue(x).numpy() for x in v]
        return v

    def as_sparse_tensor(self) -> Any:
        if not self.is_sparse_tensor():
            raise InvalidArgument("the OrtValue does not hold a sparse tensor")
        return self._value

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Copy `np_arr` into this tensor's memory (same element count and type)."""
        t = self._tensor()
        src = np.asarray(np_arr)
        if src.size != t.size or src.dtype != t.dtype:
            raise InvalidArgument(
                f"update_inplace: got {src.dtype}{list(src.shape)}, the value is "
                f"{t.dtype}{list(t.shape)}"
            )
        t.reshape(-1)[...] = src.reshape(-1)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        t = self._tensor()
        if dtype is not None and np.dtype(dtype) != t.dtype:
            return t.astype(dtype)
        return t.copy() if copy else t

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._tensor().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (CPU_DEVICE_TYPE, 0)

    def to_dlpack(self) -> Any:
        return self.__dlpack__()

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape() if self.is_tensor() else '?'})"


def is_dlpack_uint8_tensor(capsule: Any) -> bool:
    """True when the DLPack capsule holds uint8 data (onnxruntime's bool ambiguity check).

    Reads the DLTensor's dtype in place: consuming the capsule (np.from_dlpack renames
    it "used_dltensor") would leave nothing for the from_dlpack call that follows.
    """
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    ptr = get(capsule, b"dltensor")
    # DLTensor: void* data; DLDevice {int32, int32}; int32 ndim; DLDataType {u8 code, u8 bits, u16}
    code, bits = ctypes.string_at(ptr + 20, 2)
    return code == 1 and bits == 8  # kDLUInt, 8 bits


class OrtValueVector:
    """A list of OrtValues, as returned by run_with_ort_values / IOBinding.get_outputs."""

    def __init__(self, values: Sequence[OrtValue] = ()) -> None:
        self._values = list(values)

    def push_back(self, value: OrtValue) -> None:
        self._values.append(value)

    def reserve(self, n: int) -> None:
        """Accepted for compatibility: a Python list grows on demand."""

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i: int) -> OrtValue:
        return self._values[i]

    def __iter__(self) -> Iterator[OrtValue]:
        return iter(self._values)

    def numpy_at(self, i: int) -> Any:
        return self._values[i].numpy()

    def element_type_at(self, i: int) -> int:
        return self._values[i].element_type()

    def bool_tensor_indices(self) -> list[int]:
        return [
            i for i, v in enumerate(self._values) if v.is_tensor() and v.numpy().dtype == np.bool_
        ]

    def to_dlpacks(self, to_tensor: Any = None) -> list[Any]:
        caps = [v.__dlpack__() for v in self._values]
        return [to_tensor(c) for c in caps] if to_tensor is not None else caps


def unwrap(value: Any) -> Any:
    """A feed with OrtValues replaced by what they hold (lists of them included)."""
    if isinstance(value, OrtValue):
        return value.numpy()
    return value
