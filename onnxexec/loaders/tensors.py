"""TensorProto / SparseTensorProto -> numpy, with external data memory-mapped.

External data is resolved relative to the model's folder only: a location that is
absolute, escapes the folder (`../`, symlinks) or runs past the file's end is
refused, per the ONNX external-data spec (docs/ExternalData.md) and because a
model file must never make us read arbitrary files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from onnxexec.errors import ModelLoadError
from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.onnx_pb import SparseTensorProto, TensorProto

# Types numpy_helper stores packed (two or four values per byte): unpack through it.
_PACKED = {
    TensorProto.INT4,
    TensorProto.UINT4,
    TensorProto.FLOAT4E2M1,
    TensorProto.INT2,
    TensorProto.UINT2,
}


def _external_location(t: TensorProto, base_dir: Path | None) -> tuple[Path, int, int | None]:
    info = {e.key: e.value for e in t.external_data}
    loc = info.get("location")
    if not loc:
        raise ModelLoadError(f"tensor '{t.name}': external data has no location")
    if base_dir is None:
        raise ModelLoadError(
            f"tensor '{t.name}': external data '{loc}' but the model was given as bytes; "
            "load it from a path so its folder is known"
        )
    if os.path.isabs(loc) or Path(loc).drive:
        raise ModelLoadError(f"tensor '{t.name}': external data location '{loc}' is absolute")
    root = base_dir.resolve()
    path = (root / loc).resolve()
    if root != path and root not in path.parents:
        raise ModelLoadError(
            f"tensor '{t.name}': external data location '{loc}' escapes the model folder"
        )
    if not path.is_file():
        raise ModelLoadError(f"tensor '{t.name}': external data file '{loc}' not found")
    offset = int(info.get("offset", 0))
    length = int(info["length"]) if "length" in info else None
    return path, offset, length


def _read_external(t: TensorProto, base_dir: Path | None) -> np.ndarray:
    path, offset, length = _external_location(t, base_dir)
    shape = tuple(int(d) for d in t.dims)
    size = path.stat().st_size
    count = int(np.prod(shape, dtype=np.int64))
    if t.data_type in _PACKED or t.data_type == TensorProto.STRING:
        if t.data_type == TensorProto.STRING:
            raise ModelLoadError(f"tensor '{t.name}': string tensors cannot be external")
        per_byte = 4 if t.data_type in (TensorProto.INT2, TensorProto.UINT2) else 2
        need = (count + per_byte - 1) // per_byte
    else:
        need = count * np_dtype(t.data_type).itemsize
    if length is not None and length != need:  # onnxruntime: "external data size mismatch"
        raise ModelLoadError(
            f"tensor '{t.name}': external length {length} != {need} bytes for shape {list(shape)}"
        )
    if offset < 0 or offset + need > size:
        raise ModelLoadError(
            f"tensor '{t.name}': external data [{offset}, {offset + need}) runs past the end "
            f"of '{path.name}' ({size} bytes)"
        )
    if t.data_type in _PACKED:
        with path.open("rb") as f:
            f.seek(offset)
            raw = f.read(need)
        copy = TensorProto()
        copy.CopyFrom(t)
        del copy.external_data[:]
        copy.data_location = TensorProto.DEFAULT
        copy.raw_data = raw
        return _helper_to_array(copy)
    if count == 0:
        return np.zeros(shape, dtype=np_dtype(t.data_type))
    # Read-only memory map: weights are paged in on use, never copied at load.
    return np.memmap(path, dtype=np_dtype(t.data_type), mode="r", offset=offset, shape=shape)


# Types whose raw_data is not one little-endian item per element: numpy_helper decodes.
_NOT_PLAIN = _PACKED | {TensorProto.STRING, TensorProto.FLOAT6E2M3, TensorProto.FLOAT6E3M2}


def _plain_layout(t: TensorProto) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) of a tensor whose data can be one little-endian item per element
    on this host, else None (packed and string types, segments, external data,
    unknown types, negative dims)."""
    if (
        sys.byteorder != "little"
        or t.data_type in _NOT_PLAIN
        or t.data_type == TensorProto.UNDEFINED
        or t.HasField("segment")
        or t.data_location == TensorProto.EXTERNAL
    ):
        return None
    try:
        dtype = np_dtype(t.data_type)
    except (KeyError, ValueError):
        return None
    shape = tuple(int(d) for d in t.dims)
    return None if any(d < 0 for d in shape) else (dtype, shape)


_ALIGN = 64
_ALIGN_FROM = 1 << 16  # bytes


def empty_for_raw(t: TensorProto, length: int) -> np.ndarray | None:
    """An uninitialized array of `t`'s dtype and dims for its `length` raw bytes.

    None unless the bytes are exactly one little-endian item per element (what
    numpy_helper.to_array reinterprets with np.frombuffer on this host): packed
    and string types, segments, external data and size mismatches go through
    tensor_to_array, with its errors.
    """
    layout = _plain_layout(t)
    if layout is None:
        return None
    dtype, shape = layout
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != length:
        return None
    if length < _ALIGN_FROM:
        return np.empty(shape, dtype=dtype)
    # Big weights start on a cache line (numpy's large buffers start 16 bytes past a
    # page): the packed-GEMM pass may repack one over its own bytes, and its panel
    # rows then stay cache-line aligned (kernels/linalg/sgemm_packed.py).
    buf = np.empty(length + _ALIGN, dtype=np.uint8)
    skip = -buf.ctypes.data % _ALIGN
    return buf[skip : skip + length].view(dtype).reshape(shape)


# Typed repeated fields numpy_helper reads each element type from (onnx.proto's
# TensorProto comments); the other types go through numpy_helper itself.
_FIELDS = {
    TensorProto.FLOAT: "float_data",
    TensorProto.DOUBLE: "double_data",
    TensorProto.INT64: "int64_data",
    TensorProto.INT32: "int32_data",
    TensorProto.INT16: "int32_data",
    TensorProto.INT8: "int32_data",
    TensorProto.UINT16: "int32_data",
    TensorProto.UINT8: "int32_data",
    TensorProto.BOOL: "int32_data",
    TensorProto.UINT32: "uint64_data",
    TensorProto.UINT64: "uint64_data",
}


def _plain_to_array(t: TensorProto) -> np.ndarray | None:
    """numpy_helper.to_array for the common tensors, without importing onnx (see
    ir/onnx_pb.py): one item per element in raw_data (a read-only view of its
    bytes, as numpy_helper gives) or in the type's repeated field; ModelLoadError
    when their count does not match the dims. None for other layouts."""
    layout = _plain_layout(t)
    field = _FIELDS.get(t.data_type)
    if layout is None or (field is None and not t.raw_data):
        return None
    dtype, shape = layout
    count = int(np.prod(shape, dtype=np.int64))
    what = f"tensor '{t.name}' ({dtype}, shape {list(shape)})"
    if t.raw_data:
        # onnxruntime refuses these at session creation; never read past or short
        if count * dtype.itemsize != len(t.raw_data):
            raise ModelLoadError(
                f"{what} has {len(t.raw_data)} bytes of raw_data; its shape needs "
                f"{count} x {dtype.itemsize} = {count * dtype.itemsize}"
            )
        return np.frombuffer(t.raw_data, dtype=dtype).reshape(shape)
    if field is None:
        return None
    data = getattr(t, field)
    if len(data) != count:
        raise ModelLoadError(f"{what} has {len(data)} values in {field}; its shape needs {count}")
    return np.asarray(data).astype(dtype).reshape(shape)


def _helper_to_array(t: TensorProto) -> np.ndarray:
    from onnx import numpy_helper  # imports onnx: packed, string and 16/8-bit float types

    return numpy_helper.to_array(t)


def tensor_to_array(t: TensorProto, base_dir: Path | None = None) -> np.ndarray:
    """Numpy view of a TensorProto; string tensors become object arrays of str."""
    if t.data_location == TensorProto.EXTERNAL:
        return _read_external(t, base_dir)
    try:
        arr = _plain_to_array(t)
        if arr is None:
            arr = _helper_to_array(t)
    except ModelLoadError:
        raise
    except Exception as e:
        raise ModelLoadError(f"tensor '{t.name}': cannot decode ({e})") from e
    if t.data_type == TensorProto.STRING:
        flat = [
            s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else s
            for s in arr.reshape(-1)
        ]
        arr = np.array(flat, dtype=object).reshape(arr.shape)
    return arr


def sparse_to_array(s: SparseTensorProto, base_dir: Path | None = None) -> np.ndarray:
    """Dense array of a SparseTensorProto (COO, linear or per-dim indices)."""
    values = tensor_to_array(s.values, base_dir)
    indices = tensor_to_array(s.indices, base_dir).astype(np.int64)
    shape = tuple(int(d) for d in s.dims)
    dense = np.zeros(shape, dtype=values.dtype)
    if values.size == 0:
        return dense
    flat = dense.reshape(-1)
    if indices.ndim == 1:
        lin = indices
    else:
        lin = np.ravel_multi_index(tuple(indices.T), shape)
    if lin.size and (lin.min() < 0 or lin.max() >= flat.size):
        raise ModelLoadError(f"sparse tensor '{s.values.name}': index out of range for {shape}")
    flat[lin] = values.reshape(-1)
    return dense
