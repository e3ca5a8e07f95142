"""A GGUF file as editable records, and back to bytes: for building malformed files.

Written from ggml/docs/gguf.md with `struct` only (nothing shared with
onnxexec.loaders.gguf_reader, which is what the tests exercise). Only well-formed
input is decoded; encode() writes whatever the records say, so a test can set a
count, a shape, a type or an offset to any value and see what the loader does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

# value type -> struct code (gguf.md "gguf_metadata_value_type")
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


@dataclass
class KV:
    key: str
    vtype: int
    value: Any  # scalar, str, or (element type, list) for arrays


@dataclass
class TensorInfo:
    name: str
    ne: list[int]  # ggml order: ne[0] is the row length
    ggml_type: int
    offset: int  # relative to the start of the data section


@dataclass
class GGUF:
    version: int = 3
    kvs: list[KV] = field(default_factory=list)
    tensors: list[TensorInfo] = field(default_factory=list)
    data: bytes = b""
    alignment: int = 32
    # overrides for the header counts (None: the real counts)
    n_tensors: int | None = None
    n_kv: int | None = None

    def kv(self, key: str) -> KV:
        return next(k for k in self.kvs if k.key == key)

    def set(self, key: str, vtype: int, value: Any) -> None:
        for k in self.kvs:
            if k.key == key:
                k.vtype, k.value = vtype, value
                return
        self.kvs.append(KV(key, vtype, value))

    def drop(self, key: str) -> None:
        self.kvs = [k for k in self.kvs if k.key != key]

    def tensor(self, name: str) -> TensorInfo:
        return next(t for t in self.tensors if t.name == name)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, code: str) -> Any:
        (v,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += struct.calcsize("<" + code)
        return v

    def string(self) -> str:
        n = self.take("Q")
        s = self.buf[self.pos : self.pos + n].decode("utf-8", "surrogateescape")
        self.pos += n
        return s

    def value(self, vtype: int) -> Any:
        if vtype in SCALAR:
            return self.take(SCALAR[vtype])
        if vtype == STRING:
            return self.string()
        etype, n = self.take("I"), self.take("Q")
        return (etype, [self.value(etype) for _ in range(n)])


def decode(buf: bytes) -> GGUF:
    r = _Reader(buf)
    assert buf[:4] == b"GGUF"
    r.pos = 4
    g = GGUF(version=r.take("I"))
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    for _ in range(n_kv):
        key = r.string()
        vtype = r.take("I")
        g.kvs.append(KV(key, vtype, r.value(vtype)))
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.take("Q") for _ in range(r.take("I"))]
        g.tensors.append(TensorInfo(name, ne, r.take("I"), r.take("Q")))
    align = next((k.value for k in g.kvs if k.key == "general.alignment"), 32)
    g.alignment = align
    start = -(-r.pos // align) * align
    g.data = buf[start:]
    return g


def _pack_value(vtype: int, value: Any) -> bytes:
    if vtype in SCALAR:
        return struct.pack("<" + SCALAR[vtype], value)
    if vtype == STRING:
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
        return struct.pack("<Q", len(raw)) + raw
    etype, items = value
    return struct.pack("<IQ", etype, len(items)) + b"".join(_pack_value(etype, v) for v in items)


def encode(g: GGUF) -> bytes:
    out = [b"GGUF", struct.pack("<I", g.version)]
    n_tensors = len(g.tensors) if g.n_tensors is None else g.n_tensors
    n_kv = len(g.kvs) if g.n_kv is None else g.n_kv
    out.append(struct.pack("<QQ", n_tensors, n_kv))
    for k in g.kvs:
        out += [
            _pack_value(STRING, k.key),
            struct.pack("<I", k.vtype),
            _pack_value(k.vtype, k.value),
        ]
    for t in g.tensors:
        out += [_pack_value(STRING, t.name), struct.pack("<I", len(t.ne))]
        out += [struct.pack("<Q", d) for d in t.ne]
        out.append(struct.pack("<IQ", t.ggml_type, t.offset))
    head = b"".join(out)
    align = g.alignment if g.alignment > 0 else 32
    pad = -len(head) % align
    return head + b"\0" * pad + g.data
