"""ModelProto (path, bytes or proto) -> onnxexec.ir.Graph.

Attributes become Python values, subgraphs become Graphs carrying their parent's
opset imports, initializers become arrays (external data memory-mapped; the top
graph's big raw_data read from the file straight into their arrays, see proto_wire).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from onnxexec.errors import ModelLoadError
from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.graph import Function, Graph, Node, ValueInfo, canonical_domain
from onnxexec.ir.onnx_pb import (
    TEXT_SUFFIXES,
    AttributeProto,
    FunctionProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TypeProto,
    ValueInfoProto,
)
from onnxexec.ir.types import (
    MapType,
    OptionalType,
    SequenceType,
    SparseTensorType,
    TensorType,
    ValueType,
)
from onnxexec.loaders.proto_wire import WireError, split_model
from onnxexec.loaders.tensors import empty_for_raw, sparse_to_array, tensor_to_array


class AttrRef:
    """A function-body attribute that refers to the caller's attribute (ref_attr_name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"AttrRef({self.name!r})"


def convert_type(tp: TypeProto) -> ValueType | None:
    """TypeProto -> ir type; None when the proto leaves the type unset."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" or kind == "sparse_tensor_type":
        tt = getattr(tp, kind)
        shape = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim
            )
        cls = TensorType if kind == "tensor_type" else SparseTensorType
        return cls(tt.elem_type, shape)
    if kind == "sequence_type":
        return SequenceType(convert_type(tp.sequence_type.elem_type))
    if kind == "optional_type":
        return OptionalType(convert_type(tp.optional_type.elem_type))
    if kind == "map_type":
        return MapType(tp.map_type.key_type, convert_type(tp.map_type.value_type))
    return None


def _value_info(vi: ValueInfoProto) -> ValueInfo:
    return ValueInfo(vi.name, convert_type(vi.type) if vi.HasField("type") else None, vi.doc_string)


def _input_info(vi: ValueInfoProto) -> ValueInfo:
    """A graph input: its tensor element type must be one a feed can have (like
    onnxruntime, which rejects UNDEFINED or unknown input types at session creation)."""
    v = _value_info(vi)
    if isinstance(v.type, TensorType):
        try:
            np_dtype(v.type.elem_type)
        except ValueError:
            raise ModelLoadError(
                f"graph input '{v.name}' has unknown tensor element type {v.type.elem_type}"
            ) from None
    return v


def _text(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


def _array(t: Any, base_dir: Path | None, sparse: bool = False) -> np.ndarray:
    """tensor_to_array / sparse_to_array, with a malformed field (an external-data
    offset "abc", dims whose product overflows) reported as a ModelLoadError."""
    try:
        return sparse_to_array(t, base_dir) if sparse else tensor_to_array(t, base_dir)
    except (ValueError, OverflowError, TypeError) as e:
        name = t.values.name if sparse else t.name
        raise ModelLoadError(f"tensor '{name}': cannot be read ({type(e).__name__}: {e})") from e


class _Loader:
    def __init__(self, base_dir: Path | None, opsets: dict[str, int]) -> None:
        self.base_dir = base_dir
        self.opsets = opsets

    def attr(self, a: AttributeProto) -> Any:
        if a.ref_attr_name:
            return AttrRef(a.ref_attr_name)
        t = a.type
        A = AttributeProto
        if t == A.FLOAT:
            return float(a.f)
        if t == A.INT:
            return int(a.i)
        if t == A.STRING:
            return _text(a.s)
        if t == A.TENSOR:
            return _array(a.t, self.base_dir)
        if t == A.GRAPH:
            return self.graph(a.g)
        if t == A.SPARSE_TENSOR:
            return _array(a.sparse_tensor, self.base_dir, sparse=True)
        if t == A.TYPE_PROTO:
            return convert_type(a.tp)
        if t == A.FLOATS:  # the repeated fields hold Python floats / ints already
            return tuple(a.floats)
        if t == A.INTS:
            return tuple(a.ints)
        if t == A.STRINGS:
            return tuple(_text(x) for x in a.strings)
        if t == A.TENSORS:
            return tuple(_array(x, self.base_dir) for x in a.tensors)
        if t == A.GRAPHS:
            return tuple(self.graph(g) for g in a.graphs)
        if t == A.SPARSE_TENSORS:
            return tuple(_array(x, self.base_dir, sparse=True) for x in a.sparse_tensors)
        if t == A.TYPE_PROTOS:
            return tuple(convert_type(x) for x in a.type_protos)
        raise ModelLoadError(f"attribute '{a.name}' has unknown type {t}")

    def node(self, n: NodeProto) -> Node:
        # protobuf hands back bytes for a string field that is not UTF-8 (a proto2
        # quirk); names must be str, or sorting and lookups fail far from here
        fields = (n.op_type, n.domain, n.name, *n.input, *n.output)
        if not all(isinstance(f, str) for f in fields):
            raise ModelLoadError(
                f"node {n.name!r} ({n.op_type!r}): op type, domain, name, inputs and "
                "outputs must be UTF-8 strings"
            )
        try:
            attrs = {a.name: self.attr(a) for a in n.attribute}
        except ModelLoadError as e:
            raise ModelLoadError(f"node '{n.name or n.op_type}' ({n.op_type}): {e}") from e
        return Node(n.op_type, tuple(n.input), tuple(n.output), attrs, n.name, n.domain)

    def graph(
        self,
        g: GraphProto,
        functions: dict | None = None,
        metadata: dict | None = None,
        arrays: dict[int, np.ndarray] | None = None,
    ) -> Graph:
        """`arrays`: initializers already read (by index), see _cut_weights."""
        arrays = arrays or {}
        inits: dict[str, Any] = {}
        for i, t in enumerate(g.initializer):
            arr = arrays.get(i)
            inits[t.name] = _array(t, self.base_dir) if arr is None else arr
        for s in g.sparse_initializer:
            inits[s.values.name] = _array(s, self.base_dir, sparse=True)
        return Graph(
            nodes=tuple(self.node(n) for n in g.node),
            inputs=tuple(_input_info(v) for v in g.input),
            outputs=tuple(_value_info(v) for v in g.output),
            initializers=inits,
            value_info={v.name: _value_info(v) for v in g.value_info},
            opset_imports=self.opsets,
            functions=functions or {},
            name=g.name or "graph",
            metadata=metadata or {},
        )

    def function(self, f: FunctionProto) -> Function:
        defaults = {a.name: self.attr(a) for a in f.attribute_proto}
        return Function(
            name=f.name,
            domain=canonical_domain(f.domain),
            inputs=tuple(f.input),
            outputs=tuple(f.output),
            attributes=tuple(f.attribute) + tuple(defaults),
            attribute_defaults=defaults,
            nodes=tuple(self.node(n) for n in f.node),
            opset_imports={canonical_domain(o.domain): o.version for o in f.opset_import},
            overload=getattr(f, "overload", ""),
        )


def _parse(data: bytes | memoryview) -> ModelProto:
    proto = ModelProto()
    proto.ParseFromString(data)
    return proto


def _cut_weights(
    buf: memoryview, read_into: Callable[[int, np.ndarray], None]
) -> tuple[ModelProto, dict[int, np.ndarray]]:
    """Parse `buf` with the top graph's large raw_data read once into numpy arrays.

    Returns the proto (without those raw_data) and the arrays by initializer index;
    a tensor whose bytes are not plain items gets its raw_data back instead.
    """
    small, spans = split_model(buf)
    proto = _parse(small)
    del small
    inits = proto.graph.initializer
    arrays: dict[int, np.ndarray] = {}
    for sp in spans:
        t = inits[sp.index]
        arr = empty_for_raw(t, sp.length)
        if arr is None:
            t.raw_data = bytes(buf[sp.offset : sp.offset + sp.length])
            continue
        read_into(sp.offset, arr)
        arr.flags.writeable = False  # like numpy_helper's view of the proto's bytes
        arrays[sp.index] = arr
    return proto, arrays


def _read_file_into(fd: int) -> Callable[[int, np.ndarray], None]:
    def read_into(offset: int, arr: np.ndarray) -> None:
        view = arr.reshape(-1).view(np.uint8).data
        while len(view):
            n = os.preadv(fd, [view], offset)
            if n <= 0:
                raise ModelLoadError("model file shrank while it was being read")
            view, offset = view[n:], offset + n

    return read_into


def _read_path(path: Path) -> tuple[ModelProto, dict[int, np.ndarray]]:
    """The model at `path`: the structure parsed by protobuf, big weights read straight
    into their arrays (see proto_wire); onnx.load when the wire walk gives up."""
    if path.suffix.lower() in TEXT_SUFFIXES:  # .textproto, .json...: onnx.load reads those
        return _onnx_load(path), {}
    with path.open("rb") as f:
        if path.stat().st_size == 0:
            raise ModelLoadError(f"{path}: not an ONNX model (empty file)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = memoryview(mm)
            try:
                return _cut_weights(buf, _read_file_into(f.fileno()))
            except (WireError, DecodeError):
                pass
            finally:
                buf.release()
    return _onnx_load(path), {}


def _onnx_load(path: Path) -> ModelProto:
    import onnx  # only for what proto_wire and protobuf don't read: onnx's own errors

    return onnx.load(str(path), load_external_data=False)


def _read_bytes(data: bytes | bytearray | memoryview) -> tuple[ModelProto, dict[int, np.ndarray]]:
    buf = memoryview(data).cast("B")

    def read_into(offset: int, arr: np.ndarray) -> None:
        arr.reshape(-1).view(np.uint8)[:] = np.frombuffer(buf, np.uint8, arr.nbytes, offset)

    try:
        return _cut_weights(buf, read_into)
    except (WireError, DecodeError):
        import onnx

        return onnx.load_model_from_string(bytes(data)), {}


def _read_proto(
    model: str | os.PathLike | bytes | ModelProto,
) -> tuple[ModelProto, Path | None, dict[int, np.ndarray]]:
    if isinstance(model, ModelProto):
        return model, None, {}
    if isinstance(model, bytes | bytearray | memoryview):
        try:
            proto, arrays = _read_bytes(model)
        except Exception as e:
            raise ModelLoadError(f"bytes are not an ONNX model: {e}") from e
        return proto, None, arrays
    path = Path(model)
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"not a file: {path}")
    try:
        proto, arrays = _read_path(path)
    except ModelLoadError:
        raise
    except Exception as e:
        raise ModelLoadError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{path}: not an ONNX model (no graph)")
    return proto, path.parent, arrays


def load_onnx(
    model: str | os.PathLike | bytes | ModelProto, base_dir: str | os.PathLike | None = None
) -> Graph:
    """Load an ONNX model into the IR. `base_dir` overrides the external-data folder."""
    proto, folder, arrays = _read_proto(model)
    if base_dir is not None:
        folder = Path(base_dir)
    opsets = {canonical_domain(o.domain): int(o.version) for o in proto.opset_import}
    for domain, version in opsets.items():
        if not 0 <= version < 2**31:  # onnx's schema lookup takes a C int
            raise ModelLoadError(
                f"opset_import of domain '{domain or 'ai.onnx'}' has version {version}"
            )
    # A model may import only other domains (the ai.onnx.ml backend cases do); a
    # node of the default domain is then reported by the planner.
    loader = _Loader(folder, opsets)
    functions = {}
    for f in proto.functions:
        fn = loader.function(f)
        functions[(fn.domain, fn.name)] = fn
    meta = {
        "producer_name": proto.producer_name,
        "producer_version": proto.producer_version,
        "domain": proto.domain,
        "model_version": proto.model_version,
        "doc_string": proto.doc_string,
        "ir_version": proto.ir_version,
        "graph_name": proto.graph.name,
        "graph_description": proto.graph.doc_string,
        "custom_metadata_map": {p.key: p.value for p in proto.metadata_props},
    }
    return loader.graph(proto.graph, functions, meta, arrays)
