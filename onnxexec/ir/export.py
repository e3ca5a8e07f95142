"""onnxexec.ir.Graph -> ONNX ModelProto, the inverse of loaders/onnx_proto.py.

Used for SessionOptions.optimized_model_filepath: the graph after optimization,
with fused ops in the "onnxexec" domain (its opset is imported), loadable again by
onnxexec (onnxruntime does not know those ops). Attribute types come from the op
schema where onnx has one, else from the Python value (an empty tuple is INTS).
Models over 1.5 GiB of initializers are saved with external data next to the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, SupportsInt, cast

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, TypeProto, helper, numpy_helper

from onnxexec.ir.graph import Function, Graph, Node, ValueInfo
from onnxexec.ir.types import MapType, OptionalType, SequenceType, SparseTensorType, TensorType

_EXTERNAL_BYTES = 3 << 29  # 1.5 GiB: protobuf refuses messages over 2 GiB


def type_proto(t: Any) -> TypeProto:
    tp = TypeProto()
    if isinstance(t, TensorType | SparseTensorType):
        tt = tp.tensor_type if isinstance(t, TensorType) else tp.sparse_tensor_type
        tt.elem_type = t.elem_type
        if t.shape is not None:
            tt.shape.SetInParent()
            for d in t.shape:
                dim = tt.shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif d:
                    dim.dim_param = str(d)
    elif isinstance(t, SequenceType):
        tp.sequence_type.SetInParent()
        if t.elem is not None:
            tp.sequence_type.elem_type.CopyFrom(type_proto(t.elem))
    elif isinstance(t, OptionalType):
        tp.optional_type.SetInParent()
        if t.elem is not None:
            tp.optional_type.elem_type.CopyFrom(type_proto(t.elem))
    elif isinstance(t, MapType):
        tp.map_type.key_type = t.key_type
        if t.value is not None:
            tp.map_type.value_type.CopyFrom(type_proto(t.value))
    return tp


def _value_info(v: ValueInfo) -> onnx.ValueInfoProto:
    vi = onnx.ValueInfoProto(name=v.name, doc_string=v.doc)
    if v.type is not None:
        vi.type.CopyFrom(type_proto(v.type))
    return vi


def tensor_proto(name: str, v: np.ndarray) -> TensorProto:
    if v.dtype == object:
        v = np.array(
            [
                s.encode("utf-8", errors="surrogateescape") if isinstance(s, str) else s
                for s in v.reshape(-1)
            ],
            dtype=object,
        ).reshape(v.shape)
    # (np.ascontiguousarray would turn a 0-d scalar into shape (1,))
    return numpy_helper.from_array(v if v.flags.c_contiguous else v.copy(order="C"), name)


def _schema_type(node: Node, name: str, opset: int | None) -> int | None:
    if opset is None:
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # unknown op (onnxexec's own, or not in this onnx version)
        return None
    a = schema.attributes.get(name)
    # onnx's stubs give OpSchema.AttrType no __int__; the pybind11 enum has one
    return int(cast("SupportsInt", a.type)) if a is not None else None


def _attribute(name: str, v: Any, declared: int | None, opsets: Mapping[str, int]):
    A = AttributeProto
    if type(v).__name__ == "AttrRef":
        kind = cast("AttributeProto.AttributeType", declared or A.UNDEFINED)
        return helper.make_attribute_ref(name, kind)
    if isinstance(v, Graph):
        return helper.make_attribute(name, graph_proto(v, opsets))
    if isinstance(v, np.ndarray):
        return helper.make_attribute(name, tensor_proto("", v))
    if isinstance(v, TensorType | SequenceType | OptionalType | MapType | SparseTensorType):
        return helper.make_attribute(name, type_proto(v))
    if isinstance(v, tuple):
        if not v:
            return helper.make_attribute(name, [], attr_type=declared or A.INTS)
        if isinstance(v[0], Graph):
            return helper.make_attribute(name, [graph_proto(x, opsets) for x in v])
        if isinstance(v[0], np.ndarray):
            return helper.make_attribute(name, [tensor_proto("", x) for x in v])
        if declared == A.FLOATS:
            v = tuple(float(x) for x in v)
        return helper.make_attribute(name, list(v), attr_type=declared)
    if declared == A.FLOAT and isinstance(v, int):
        v = float(v)
    return helper.make_attribute(name, v, attr_type=declared)


def node_proto(n: Node, opsets: Mapping[str, int]) -> onnx.NodeProto:
    p = onnx.NodeProto(op_type=n.op_type, name=n.name, domain=n.domain)
    p.input.extend(n.inputs)
    p.output.extend(n.outputs)
    opset = opsets.get(n.domain)
    for k, v in n.attrs.items():
        p.attribute.append(_attribute(k, v, _schema_type(n, k, opset), opsets))
    return p


def graph_proto(g: Graph, opsets: Mapping[str, int] | None = None) -> onnx.GraphProto:
    opsets = g.opset_imports if opsets is None else opsets
    gp = onnx.GraphProto(name=g.name)
    gp.node.extend(node_proto(n, opsets) for n in g.nodes)
    gp.input.extend(_value_info(v) for v in g.inputs)
    gp.output.extend(_value_info(v) for v in g.outputs)
    gp.value_info.extend(_value_info(v) for v in g.value_info.values())
    gp.initializer.extend(
        tensor_proto(k, v) for k, v in g.initializers.items() if isinstance(v, np.ndarray)
    )
    return gp


def _function_proto(f: Function) -> onnx.FunctionProto:
    fp = onnx.FunctionProto(name=f.name, domain=f.domain, overload=f.overload)
    fp.input.extend(f.inputs)
    fp.output.extend(f.outputs)
    defaults = set(f.attribute_defaults)
    fp.attribute.extend(a for a in f.attributes if a not in defaults)
    for k, v in f.attribute_defaults.items():
        fp.attribute_proto.append(_attribute(k, v, None, f.opset_imports))
    fp.node.extend(node_proto(n, f.opset_imports) for n in f.nodes)
    fp.opset_import.extend(helper.make_opsetid(d, v) for d, v in f.opset_imports.items())
    return fp


def to_model(g: Graph) -> onnx.ModelProto:
    """The ModelProto of `g` (opset imports, functions and model metadata included)."""
    m = onnx.ModelProto()
    meta = g.metadata
    m.ir_version = int(meta.get("ir_version") or onnx.IR_VERSION)
    m.producer_name = "onnxexec"
    m.producer_version = str(meta.get("producer_version", ""))
    m.domain = str(meta.get("domain", ""))
    m.model_version = int(meta.get("model_version", 0))
    m.doc_string = str(meta.get("doc_string", ""))
    for k, v in dict(meta.get("custom_metadata_map", {})).items():
        m.metadata_props.add(key=k, value=v)
    opsets = dict(g.opset_imports)
    for n in g.nodes:
        if n.domain == "onnxexec":
            opsets.setdefault("onnxexec", 1)
    m.opset_import.extend(helper.make_opsetid(d, v) for d, v in opsets.items())
    m.graph.CopyFrom(graph_proto(g, opsets))
    m.functions.extend(_function_proto(f) for f in g.functions.values())
    return m


def save_model(g: Graph, path: str | os.PathLike) -> None:
    """Write `g` as an ONNX file (external data beside it for very large models)."""
    m = to_model(g)
    total = sum(t.ByteSize() for t in m.graph.initializer)
    if total > _EXTERNAL_BYTES:
        onnx.save_model(
            m,
            os.fspath(path),
            save_as_external_data=True,
            location=os.path.basename(os.fspath(path)) + ".data",
        )
    else:
        onnx.save_model(m, os.fspath(path))
