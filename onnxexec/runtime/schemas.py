"""onnx's operator schemas (onnx.defs), without importing the onnx package.

`import onnx` costs 0.6 s and 16 MB (see ir/onnx_pb.py); the schemas live in its C
extension, which loads in 15 ms. The extension is a nanobind module and may be
initialised once per process, so it is registered under its own name: a later
`import onnx` finds it in sys.modules and uses the same module object.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

_EXT = "onnx.onnx_cpp2py_export"


@cache
def onnx_defs() -> ModuleType:
    """The `defs` submodule of onnx's C extension (get_schema, schema_version_map)."""
    return _extension().defs


def onnx_shape_inference() -> ModuleType:
    """The `shape_inference` submodule of onnx's C extension (infer_shapes on bytes)."""
    return _extension().shape_inference


@cache
def _extension() -> ModuleType:
    ext = sys.modules.get(_EXT)
    if ext is None:
        spec = importlib.util.find_spec("onnx")
        where = spec.submodule_search_locations if spec is not None else None
        if not where:
            raise ImportError("the onnx package is not installed")
        so = next(Path(where[0]).glob("onnx_cpp2py_export*.so"), None) or next(
            Path(where[0]).glob("onnx_cpp2py_export*.pyd")
        )
        loader = importlib.machinery.ExtensionFileLoader(_EXT, str(so))
        ext_spec = importlib.util.spec_from_file_location(_EXT, so, loader=loader)
        assert ext_spec is not None
        ext = importlib.util.module_from_spec(ext_spec)
        loader.exec_module(ext)
        sys.modules[_EXT] = ext
    return ext


@lru_cache(maxsize=4096)
def schema(op_type: str, opset: int, domain: str) -> Any | None:
    """The OpSchema of `op_type` in force at `opset` of `domain`, None if unknown."""
    defs = onnx_defs()
    try:
        return defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        return None


@cache
def opset_range(domain: str) -> tuple[int, int] | None:
    """(first, last) opset onnx knows for `domain` ('' = ai.onnx), None if unknown."""
    r = onnx_defs().schema_version_map().get(domain)
    return None if r is None else (int(r[0]), int(r[1]))
