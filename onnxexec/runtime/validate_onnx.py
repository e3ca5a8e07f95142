"""onnx's own type and shape inference in strict mode, the check onnxruntime runs on
every node at load (Graph::Resolve calls each schema's inference function and fails
the session on its errors): an invalid Reshape, Gather axis, Transpose perm, MatMul
with disagreeing static dimensions...

Run on the model's bytes without its large weights (proto_wire cuts their raw_data;
inference reads only dims and small constants). Declared value_info and output
shapes are dropped first: onnxruntime merges those leniently (a warning), onnx's
strict mode would fail on a mismatch. Errors inside a function body's expansion are
not reported (onnxruntime expands functions itself: test_mvn's Constant), nor a node
whose input has no type yet (onnx infers in list order; onnxruntime sorts first).
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path
from typing import Any

from onnxexec.ir.onnx_pb import ModelProto
from onnxexec.loaders.onnx_proto import TEXT_SUFFIXES
from onnxexec.loaders.proto_wire import WireError, split_model
from onnxexec.runtime.schemas import onnx_shape_inference

# A serialized ModelProto above this is not re-serialized for the check.
_MAX_PROTO_BYTES = 64 << 20
# Bytes up to this go to protobuf whole; bigger ones lose their large raw_data first.
_COPY_BYTES = 16 << 20
# One node's entry in onnx's "Inference error(s): " list.
_ENTRY = re.compile(r"\(op_type:([^,)]+)(?:, node name: ([^)]*))?\): (.*)")


def _small_bytes(source: Any) -> bytes | None:
    """The model without its large raw_data, or None when it cannot be had cheaply."""
    if isinstance(source, ModelProto):
        if source.ByteSize() > _MAX_PROTO_BYTES:
            return None
        source = source.SerializeToString()
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source) <= _COPY_BYTES:  # protobuf copies that faster than a wire walk
            return bytes(source)
        return split_model(memoryview(source).cast("B"))[0]
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.suffix.lower() in TEXT_SUFFIXES:
            return None  # text formats: onnx.load's business
        if path.stat().st_size <= _COPY_BYTES:
            return path.read_bytes()
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = memoryview(mm)
            try:
                return split_model(buf)[0]
            finally:
                buf.release()
    return None


def _lenient_declarations(data: bytes) -> bytes:
    m = ModelProto()
    m.ParseFromString(data)
    del m.graph.value_info[:]
    for o in m.graph.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    return m.SerializeToString()


def strict_inference_problems(source: Any) -> list[tuple[str, str, str]]:
    """onnx strict inference's complaints about the model `source` (path, bytes or
    ModelProto) as (node name, op type, message); [] when none or it cannot run."""
    try:
        data = _small_bytes(source)
        if data is None:
            return []
        data = _lenient_declarations(data)
    except (OSError, ValueError, WireError):
        return []  # the loader already read this model; its reading is what counts
    si = onnx_shape_inference()
    try:
        si.infer_shapes(data, True, True, False)
    except si.InferenceError as e:
        return _problems(str(e))
    except Exception:
        return []  # anything else is not a verdict on the model
    return []


def _problems(text: str) -> list[tuple[str, str, str]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        m = _ENTRY.match(line.removeprefix("[ShapeInferenceError] Inference error(s): "))
        if m is None:
            continue
        op, name, msg = m.groups()
        if "Inference error(s):" in msg:
            continue  # raised inside a function body's expansion
        if "but instead is null" in msg:
            continue  # an input not typed yet: nodes out of order (onnxruntime sorts)
        out.append((name or "", op, msg.strip()))
    return out
