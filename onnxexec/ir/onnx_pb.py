"""ONNX's protobuf message classes, without importing the onnx package.

`import onnx` runs onnx/__init__, which imports onnx.helper and through it ml_dtypes:
0.59 s and 16 MB of RSS in every process on this machine (ml_dtypes' extension alone
0.55 s and 8 MB), before a model is even read. Loading and running a model needs only
the generated message classes of onnx/onnx-ml.proto, so this module executes onnx's
own generated file (onnx_ml_pb2.py, which imports nothing but protobuf) under a
private module name: 16 ms. The protobuf runtime registers the file in its default
descriptor pool and makes one class per message descriptor, so these are the very
classes `onnx` exposes whichever of the two is imported first (`onnx.ModelProto is
onnx_pb.ModelProto`; tests/unit/loaders/test_onnx_pb.py). When onnx is already
imported, its module is used as it is. The onnx package is still imported, lazily,
for what only it does: textual model formats and numpy_helper's packed / string
tensor decoding.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any


def _pb2() -> ModuleType:
    loaded = sys.modules.get("onnx.onnx_ml_pb2")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("onnx")
    where = spec.submodule_search_locations if spec is not None else None
    if where:
        for folder in where:
            path = f"{folder}/onnx_ml_pb2.py"
            own = importlib.util.spec_from_file_location("onnxexec._onnx_ml_pb2", path)
            if own is None or own.loader is None:
                continue
            try:
                module = importlib.util.module_from_spec(own)
                own.loader.exec_module(module)
            except (OSError, ImportError):
                continue
            sys.modules["onnxexec._onnx_ml_pb2"] = module
            return module
    import onnx.onnx_ml_pb2  # an unusual install: let onnx find its own file

    return onnx.onnx_ml_pb2


_pb = _pb2()
AttributeProto: Any = _pb.AttributeProto
FunctionProto: Any = _pb.FunctionProto
GraphProto: Any = _pb.GraphProto
ModelProto: Any = _pb.ModelProto
NodeProto: Any = _pb.NodeProto
SparseTensorProto: Any = _pb.SparseTensorProto
TensorProto: Any = _pb.TensorProto
TypeProto: Any = _pb.TypeProto
ValueInfoProto: Any = _pb.ValueInfoProto

# Suffixes onnx.load reads as text (onnx.serialization's registry, onnx 1.23): any other
# is read as binary protobuf, as onnx.load does.
TEXT_SUFFIXES = frozenset(
    {".txtpb", ".textproto", ".pbtxt", ".prototxt", ".json", ".onnxjson", ".onnxtxt", ".onnxtext"}
)
