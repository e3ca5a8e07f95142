"""Split a serialized ModelProto into its small structure and its big raw tensors.

`onnx.load` reads the file into one bytes object, protobuf copies every
initializer's `raw_data` into the parsed message, and reading `t.raw_data` copies
it once more: three copies of the weights for a moment, all of them at the peak.
Here the protobuf wire format (protobuf.dev/programming-guides/encoding) is walked
just deep enough to cut `raw_data` out of the top graph's initializers: protobuf
parses the rest (nodes, shapes, names, small tensors), and each cut tensor is read
from the file straight into its own numpy buffer, once.

Only ModelProto.graph (field 7) -> GraphProto.initializer (field 5) ->
TensorProto.raw_data (field 9) is rewritten; anything else is copied byte for byte.
Any surprise in the wire data raises `WireError` and the caller falls back to
onnx.load, so a malformed file gets onnx's own error.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

_MODEL_GRAPH = 7  # onnx.proto: ModelProto.graph
_GRAPH_INITIALIZER = 5  # GraphProto.initializer
_TENSOR_RAW_DATA = 9  # TensorProto.raw_data
_LEN = 2  # wire type of length-delimited fields
_KEY_GRAPH = bytes([_MODEL_GRAPH << 3 | _LEN])
_KEY_INITIALIZER = bytes([_GRAPH_INITIALIZER << 3 | _LEN])
MIN_CUT = 1024  # smaller raw_data stays in the message: not worth a separate read


class WireError(ValueError):
    """The bytes are not the ModelProto layout this module expects."""


@dataclass(frozen=True)
class RawSpan:
    """Where one initializer's raw_data lies in the source: [offset, offset + length)."""

    index: int  # position among GraphProto.initializer
    offset: int
    length: int


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _fields(buf: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, field start, payload start, payload end) per field."""
    while pos < end:
        start = pos
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos, end)
            yield field, wire, start, pos, pos
            continue
        if wire == 1:
            size = 8
        elif wire == 5:
            size = 4
        elif wire == _LEN:
            size, pos = _varint(buf, pos, end)
        else:  # groups (3, 4) are not used by onnx.proto
            raise WireError(f"unexpected wire type {wire}")
        if pos + size > end:
            raise WireError("field runs past the end of its message")
        yield field, wire, start, pos, pos + size
        pos += size


def _tensor(buf: memoryview, pos: int, end: int, index: int, spans: list[RawSpan]) -> list:
    """Pieces of one TensorProto with a large raw_data cut out (recorded in spans)."""
    pieces: list = []
    copy_from = pos
    for field, wire, start, p0, p1 in _fields(buf, pos, end):
        if field == _TENSOR_RAW_DATA and wire == _LEN and p1 - p0 >= MIN_CUT:
            pieces.append(buf[copy_from:start])
            spans.append(RawSpan(index, p0, p1 - p0))
            copy_from = p1
    pieces.append(buf[copy_from:end])
    return pieces


def _graph(buf: memoryview, pos: int, end: int, spans: list[RawSpan]) -> list:
    pieces: list = []
    copy_from = pos
    index = 0
    for field, wire, start, p0, p1 in _fields(buf, pos, end):
        if field != _GRAPH_INITIALIZER or wire != _LEN:
            continue
        before = len(spans)
        inner = _tensor(buf, p0, p1, index, spans)
        index += 1
        if len(spans) == before:
            continue  # nothing cut: the bytes stay in the copied run
        pieces.append(buf[copy_from:start])
        body = b"".join(inner)
        pieces += [_KEY_INITIALIZER, _encode_varint(len(body)), body]
        copy_from = p1
    pieces.append(buf[copy_from:end])
    return pieces


def split_model(buf: memoryview) -> tuple[bytes, list[RawSpan]]:
    """(ModelProto bytes without the cut raw_data, where each cut piece lies in buf)."""
    end = len(buf)
    spans: list[RawSpan] = []
    pieces: list = []
    copy_from = 0
    seen_graph = False
    for field, wire, start, p0, p1 in _fields(buf, 0, end):
        if field != _MODEL_GRAPH or wire != _LEN:
            continue
        if seen_graph:  # protobuf would merge repeated messages: leave that to it
            raise WireError("ModelProto.graph appears twice")
        seen_graph = True
        body = b"".join(_graph(buf, p0, p1, spans))
        pieces += [buf[copy_from:start], _KEY_GRAPH, _encode_varint(len(body)), body]
        copy_from = p1
    pieces.append(buf[copy_from:end])
    return b"".join(pieces), spans
