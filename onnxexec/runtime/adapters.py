"""LoRA adapter files in onnxruntime's format (`.onnx_adapter`), read and written.

The format is a FlatBuffer (onnxruntime/lora/adapter_format/adapter_schema.fbs, file
identifier "TORT"): table Adapter {format_version, adapter_version, model_version,
parameters: [Parameter]}, table Parameter {name, dims: [int64], data_type (ONNX
element type), raw_data: [uint8] aligned to 8}. Only these two tables exist, so they
are read and written here directly rather than through the flatbuffers package. A
parameter is fed as the model input of the same name when its adapter is active
(`RunOptions.add_active_adapter`), overriding the initializer behind that input.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from onnxexec.errors import InvalidArgument, ModelLoadError
from onnxexec.ir.dtypes import np_dtype
from onnxexec.runtime.ortvalue import OrtValue, elem_type_of

FORMAT_VERSION = 1
_IDENT = b"TORT"


def _u16(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<H", b, at)[0])


def _u32(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", b, at)[0])


class _Table:
    """A FlatBuffer table at `pos`: field i is at the offset its vtable slot holds."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        self.vt = pos - int(struct.unpack_from("<i", buf, pos)[0])
        self.vsize = _u16(buf, self.vt)

    def field(self, i: int) -> int | None:
        slot = 4 + 2 * i
        off = _u16(self.buf, self.vt + slot) if slot < self.vsize else 0
        return self.pos + off if off else None

    def int32(self, i: int) -> int:
        at = self.field(i)
        return 0 if at is None else int(struct.unpack_from("<i", self.buf, at)[0])

    def vector(self, i: int) -> tuple[int, int]:
        """(element count, position of the first element); (0, 0) when absent."""
        at = self.field(i)
        if at is None:
            return 0, 0
        start = at + _u32(self.buf, at)
        return _u32(self.buf, start), start + 4


def _parse(buf: bytes) -> tuple[int, int, int, dict[str, np.ndarray]]:
    if len(buf) < 8 or buf[4:8] != _IDENT:
        raise ModelLoadError("not an onnxruntime adapter file (no 'TORT' identifier)")
    root = _Table(buf, _u32(buf, 0))
    n, first = root.vector(3)
    params = {}
    for k in range(n):
        at = first + 4 * k
        p = _Table(buf, at + _u32(buf, at))
        name_at = p.field(0)
        if name_at is None:
            raise ModelLoadError(f"adapter parameter {k} has no name")
        s = name_at + _u32(buf, name_at)
        name = buf[s + 4 : s + 4 + _u32(buf, s)].decode("utf-8")
        nd, dims_at = p.vector(1)
        dims = struct.unpack_from(f"<{nd}q", buf, dims_at) if nd else ()
        nbytes, data_at = p.vector(3)
        dt = np_dtype(p.int32(2))
        arr = np.frombuffer(buf, dtype=dt, count=nbytes // dt.itemsize, offset=data_at)
        params[name] = arr.reshape(dims).copy()
    return root.int32(0), root.int32(1), root.int32(2), params


class _Writer:
    """Lays a FlatBuffer out front to back: every offset points forward, so a field
    holding one is written first and patched when its target is placed."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def pad(self, align: int, ahead: int = 0) -> None:
        while (len(self.buf) + ahead) % align:
            self.buf.append(0)

    def patch(self, at: int) -> None:
        struct.pack_into("<I", self.buf, at, len(self.buf) - at)

    def table(self, fields: list[tuple[str, Any]], ref: int | None = None) -> list[int]:
        """A vtable then its table of 4-byte fields ("i" int32, "o" offset to patch);
        `ref` is the offset field that points at the table. Returns where each of the
        table's offset fields is."""
        self.pad(2)
        vt = len(self.buf)
        size = 4 + 4 * len(fields)
        self.buf += struct.pack(f"<HH{len(fields)}H", 4 + 2 * len(fields), size,
                                *(4 + 4 * i for i in range(len(fields))))  # fmt: skip
        self.pad(4)
        pos = len(self.buf)
        if ref is not None:
            self.patch(ref)
        self.buf += struct.pack("<i", pos - vt)
        slots = []
        for kind, value in fields:
            if kind == "o":
                slots.append(len(self.buf))
            self.buf += struct.pack("<i", value if kind == "i" else 0)
        return slots

    def vector(self, slot: int, data: bytes, count: int, align: int = 4) -> None:
        self.pad(align, ahead=4)
        self.patch(slot)
        self.buf += struct.pack("<I", count) + data


def _serialize(adapter_version: int, model_version: int, params: dict[str, np.ndarray]) -> bytes:
    w = _Writer()
    w.buf += struct.pack("<I", 0) + _IDENT
    w.pad(4)
    (params_slot,) = w.table(
        [("i", FORMAT_VERSION), ("i", adapter_version), ("i", model_version), ("o", 0)], ref=0
    )
    w.vector(params_slot, b"\0" * 4 * len(params), len(params))
    elems = len(w.buf) - 4 * len(params)
    for k, (name, arr) in enumerate(params.items()):
        name_slot, dims_slot, data_slot = w.table(
            [("o", 0), ("o", 0), ("i", elem_type_of(arr)), ("o", 0)], ref=elems + 4 * k
        )
        w.vector(name_slot, name.encode("utf-8") + b"\0", len(name.encode("utf-8")))
        w.vector(dims_slot, struct.pack(f"<{arr.ndim}q", *arr.shape), arr.ndim, align=8)
        raw = np.ascontiguousarray(arr).tobytes()
        w.vector(data_slot, raw, len(raw), align=8)
    return bytes(w.buf)


class AdapterFormat:
    """Build, write and read adapter files (onnxruntime.AdapterFormat)."""

    def __init__(self) -> None:
        self._adapter_version = 0
        self._model_version = 0
        self._params: dict[str, OrtValue] = {}

    def set_adapter_version(self, version: int) -> None:
        self._adapter_version = int(version)

    def set_model_version(self, version: int) -> None:
        self._model_version = int(version)

    def set_parameters(self, params: dict[str, OrtValue]) -> None:
        self._params = dict(params)

    def get_adapter_version(self) -> int:
        return self._adapter_version

    def get_model_version(self) -> int:
        return self._model_version

    def get_parameters(self) -> dict[str, OrtValue]:
        return dict(self._params)

    def export_adapter(self, file_path: str | os.PathLike) -> None:
        arrays = {}
        for name, v in self._params.items():
            arr = v.numpy() if isinstance(v, OrtValue) else np.asarray(v)
            if not isinstance(arr, np.ndarray) or arr.dtype == object:
                raise InvalidArgument(f"adapter parameter '{name}' must be a numeric tensor")
            arrays[name] = arr
        data = _serialize(self._adapter_version, self._model_version, arrays)
        with open(file_path, "wb") as f:
            f.write(data)

    @staticmethod
    def read_adapter(file_path: str | os.PathLike) -> AdapterFormat:
        with open(file_path, "rb") as f:
            _, adapter_version, model_version, params = _parse(f.read())
        fmt = AdapterFormat()
        fmt.set_adapter_version(adapter_version)
        fmt.set_model_version(model_version)
        fmt.set_parameters({k: OrtValue(v) for k, v in params.items()})
        return fmt


class LoraAdapter:
    """An adapter loaded for runs: activate it with RunOptions.add_active_adapter."""

    def __init__(self) -> None:
        self.parameters: dict[str, np.ndarray] = {}

    def Load(self, adapter_path: str | os.PathLike) -> None:
        fmt = AdapterFormat.read_adapter(adapter_path)
        self.parameters = {k: v.numpy() for k, v in fmt.get_parameters().items()}


def adapter_feeds(adapters: list[Any]) -> dict[str, np.ndarray]:
    """The model inputs the active adapters set (a later adapter wins on a name clash)."""
    feeds: dict[str, np.ndarray] = {}
    for a in adapters:
        feeds.update(a.parameters)
    return feeds
