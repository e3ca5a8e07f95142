"""GGUF files: metadata decoded to Python values, tensors as zero-copy memmap views.

Layout (ggml/docs/gguf.md, versions 2 and 3, little-endian): magic "GGUF", u32 version,
u64 tensor_count, u64 kv_count; kv_count (key, u32 value_type, value) records;
tensor_count (name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset) records;
padding to `general.alignment` (default 32); then the tensor data, each tensor at
data_start + offset. ggml lists dims fastest-first (ne[0] = row length), so a GGUF
matrix with ne = [K, N] is numpy shape (N, K): N rows of K values.

The header is parsed here with `struct` rather than through gguf-py's GGUFReader:
GGUFReader builds several numpy views per array element, which takes seconds for a
49k-token vocabulary, while this parser reads the same header in well under a
second. The tensors are the same memmap views GGUFReader would give (tests compare
both readers field by field and tensor by tensor).
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnxexec.errors import GGUFError
from onnxexec.loaders.ggml_types import BLOCK, GGMLType

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
# gguf.cpp rejects arrays of arrays; gguf-py can write them, so a few levels are read,
# but not enough for a crafted file to exhaust the Python stack
MAX_ARRAY_DEPTH = 4

# gguf_type in ggml/src/gguf.cpp: id -> (struct code, size); 7 = bool, 8 = string, 9 = array
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("B", 1),
    1: ("b", 1),
    2: ("H", 2),
    3: ("h", 2),
    4: ("I", 4),
    5: ("i", 4),
    6: ("f", 4),
    7: ("?", 1),
    10: ("Q", 8),
    11: ("q", 8),
    12: ("d", 8),
}
_NP_SCALARS = {
    0: "<u1",
    1: "<i1",
    2: "<u2",
    3: "<i2",
    4: "<u4",
    5: "<i4",
    6: "<f4",
    7: "<u1",
    10: "<u8",
    11: "<i8",
    12: "<f8",
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor: `data` is a read-only uint8 memmap view of its raw bytes.

    shape is numpy order (reversed ggml ne): a weight (N, K) has N rows of K values.
    """

    name: str
    ggml_type: GGMLType
    shape: tuple[int, ...]
    data: np.ndarray
    n_bytes: int
    offset: int  # absolute byte offset of the data in the file

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF file. Tensors stay on disk (memory-mapped) until read."""

    path: str
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor]
    alignment: int
    data_offset: int

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


_U64 = struct.Struct("<Q")
_CHUNK = 1 << 16  # bytes copied out of the map at a time by _Cursor._strings


class _Cursor:
    """Bounds-checked little-endian reads from the mapped file."""

    def __init__(self, buf: memoryview, path: str) -> None:
        self.buf = buf
        self.pos = 0
        self.path = path

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(
                f"{self.path}: truncated GGUF file: {what} needs {n} bytes at offset "
                f"{self.pos}, but the file is {len(self.buf)} bytes"
            )

    def scalar(self, code: str, size: int, what: str) -> Any:
        self.need(size, what)
        (v,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += size
        return v

    def u32(self, what: str) -> int:
        return int(self.scalar("I", 4, what))

    def u64(self, what: str) -> int:
        return int(self.scalar("Q", 8, what))

    def string(self, what: str) -> str:
        n = self.u64(what)
        self.need(n, what)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        # surrogateescape keeps invalid UTF-8 (seen in some vocabularies) lossless
        return raw.decode("utf-8", errors="surrogateescape")

    def _strings(self, n: int) -> list[str] | None:
        """n strings in one tight loop; None (position unchanged) if any runs past the
        end, so that the per-element path raises its precise error.

        The map is read through `bytes` chunks: slicing bytes is several times cheaper
        than slicing the memoryview, which matters for ~100k vocabulary strings."""
        buf, pos, end = self.buf, self.pos, len(self.buf)
        unpack = _U64.unpack_from
        out: list[str] = []
        append = out.append
        chunk, o = b"", 0  # chunk = buf[pos - o : ...]; o = pos's offset in it
        for _ in range(n):
            if o + 8 > len(chunk):
                if pos + 8 > end:
                    return None
                chunk, o = bytes(buf[pos : pos + _CHUNK]), 0
            (m,) = unpack(chunk, o)
            if o + 8 + m > len(chunk):
                if pos + 8 + m > end:
                    return None
                chunk, o = bytes(buf[pos : pos + max(_CHUNK, 8 + m)]), 0
            append(str(chunk[o + 8 : o + 8 + m], "utf-8", "surrogateescape"))
            o += 8 + m
            pos += 8 + m
        self.pos = pos
        return out

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        if vtype in _SCALARS:
            code, size = _SCALARS[vtype]
            return self.scalar(code, size, what)
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise GGUFError(
                    f"{self.path}: {what}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels"
                )
            etype = self.u32(what)
            n = self.u64(what)
            if etype in _NP_SCALARS:  # numeric array: one numpy read, no per-element loop
                size = _SCALARS[etype][1]
                self.need(n * size, what)
                arr = np.frombuffer(self.buf, dtype=_NP_SCALARS[etype], count=n, offset=self.pos)
                self.pos += n * size
                return arr.astype(bool).tolist() if etype == 7 else arr.tolist()
            if etype not in (_STRING, _ARRAY):
                raise GGUFError(f"{self.path}: {what}: unknown GGUF array element type {etype}")
            self.need(n * 8, what)  # every string/array element takes at least 8 bytes
            if etype == _STRING:
                fast = self._strings(n)  # vocabularies: ~100k strings
                if fast is not None:
                    return fast
            return [self.value(etype, what, depth + 1) for _ in range(n)]
        raise GGUFError(f"{self.path}: {what}: unknown GGUF value type {vtype}")


def _check_header(mm: np.ndarray, path: str) -> int:
    if len(mm) < 4 or bytes(mm[:4]) != GGUF_MAGIC:
        head = bytes(mm[:4])
        raise GGUFError(f"{path}: not a GGUF file (magic {head!r}, expected b'GGUF')")
    if len(mm) < 24:
        raise GGUFError(f"{path}: truncated GGUF file: {len(mm)} bytes, header needs 24")
    (version,) = struct.unpack_from("<I", mm.data, 4)
    if version & 0xFFFF == 0 and version != 0:
        raise GGUFError(f"{path}: big-endian GGUF files are not supported")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFError(
            f"{path}: unsupported GGUF version {version} (supported: {SUPPORTED_VERSIONS})"
        )
    return int(version)


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Parse a GGUF file's header and memory-map its tensors (no tensor bytes are copied).

    Raises GGUFError naming the file (and tensor) when the file is not GGUF, is
    truncated, uses an unsupported version, or holds a tensor of unknown type.
    """
    p = str(Path(path))
    if not os.path.isfile(p):
        raise GGUFError(f"{p}: no such file")
    if os.path.getsize(p) == 0:
        raise GGUFError(f"{p}: not a GGUF file (empty)")
    mm = np.memmap(p, dtype=np.uint8, mode="r")
    version = _check_header(mm, p)
    cur = _Cursor(mm.data, p)
    cur.pos = 8
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata count")
    # every record takes at least 13 (kv: key length, type, a 1-byte value) or 24 bytes
    # (tensor: name length, n_dims, type, offset): counts the file cannot hold are
    # rejected before any loop runs
    if n_kv * 13 + n_tensors * 24 > len(mm) - cur.pos:
        raise GGUFError(
            f"{p}: truncated GGUF file: header claims {n_tensors} tensors and {n_kv} "
            f"metadata entries, more than a {len(mm)}-byte file can hold"
        )

    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = cur.string(f"metadata key #{i}")
        vtype = cur.u32(f"metadata '{key}' type")
        if key in metadata:
            raise GGUFError(f"{p}: duplicate metadata key '{key}'")
        metadata[key] = cur.value(vtype, f"metadata '{key}'")

    infos = []
    for i in range(n_tensors):
        name = cur.string(f"tensor #{i} name")
        n_dims = cur.u32(f"tensor '{name}' n_dims")
        if n_dims > MAX_DIMS:
            raise GGUFError(f"{p}: tensor '{name}' has {n_dims} dims (max {MAX_DIMS})")
        ne = [cur.u64(f"tensor '{name}' dims") for _ in range(n_dims)]
        type_id = cur.u32(f"tensor '{name}' type")
        offset = cur.u64(f"tensor '{name}' offset")
        infos.append((name, ne, type_id, offset))

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise GGUFError(f"{p}: general.alignment {alignment!r} is not a power of two")
    data_offset = -(-cur.pos // alignment) * alignment

    tensors: dict[str, GGUFTensor] = {}
    for name, ne, type_id, offset in infos:
        if name in tensors:
            raise GGUFError(f"{p}: duplicate tensor name '{name}'")
        tensors[name] = _tensor(mm, p, name, ne, type_id, data_offset + offset, alignment)
    return GGUFFile(p, version, metadata, tensors, alignment, data_offset)


def _tensor(
    mm: np.ndarray, path: str, name: str, ne: list[int], type_id: int, start: int, alignment: int
) -> GGUFTensor:
    try:
        gtype = GGMLType(type_id)
    except ValueError:
        raise GGUFError(f"{path}: tensor '{name}' has unknown ggml type id {type_id}") from None
    block, type_size = BLOCK[gtype]
    if ne and ne[0] % block:
        raise GGUFError(
            f"{path}: tensor '{name}' ({gtype.name}) row length {ne[0]} is "
            f"not a multiple of the block size {block}"
        )
    n_elem = 1
    for d in ne:  # Python ints: numpy's int64 product wraps (2^32 x 2^32 dims -> 0 bytes)
        n_elem *= d
    n_bytes = n_elem // block * type_size
    if start % alignment:
        raise GGUFError(
            f"{path}: tensor '{name}' data offset {start} is not aligned to {alignment}"
        )
    if start + n_bytes > len(mm):
        raise GGUFError(
            f"{path}: truncated GGUF file: tensor '{name}' needs bytes {start}..{start + n_bytes}"
            f" but the file is {len(mm)} bytes"
        )
    data = mm[start : start + n_bytes].view(np.ndarray)  # plain ndarray over the map
    return GGUFTensor(name, gtype, tuple(reversed(ne)), data, n_bytes, start)
