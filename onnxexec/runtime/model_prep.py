"""What SessionOptions change about the model before planning, and the optimized-model file.

- `add_initializer` / `add_external_initializers`: initializer values given by the
  caller replace the model's (or supply data the model keeps in a file it does not ship).
- `add_external_initializers_from_files_in_memory`: external-data files given as bytes.
- `add_free_dimension_override_by_name` / `_by_denotation`: symbolic input dimensions
  fixed to a size, so `get_inputs()` shows it and feeds are checked against it.
- an "ort_config" JSON in the model's metadata (onnxruntime's format, read when the
  environment has ORT_LOAD_CONFIG_FROM_MODEL=1 or the session config
  "session.load_config_from_model" is "1") sets session options.
- `optimized_model_filepath` with the two "optimized_model_external_initializers" config
  entries writes initializers of at least the given size to one external file.

The model is edited as a ModelProto (onnx is imported only when one of these is used).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from onnxexec.errors import ConfigError, InvalidGraphError, ModelFileNotFoundError
from onnxexec.ir.graph import Graph
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.runtime.options import (
    EXT_DATA_FILE,
    EXT_DATA_MIN_SIZE,
    LOAD_CONFIG_FROM_MODEL,
    ExecutionMode,
    GraphOptimizationLevel,
    SessionOptions,
)
from onnxexec.runtime.ortvalue import unwrap


def check_path(model: Any) -> None:
    if isinstance(model, str | os.PathLike) and not Path(model).exists():
        path = os.fspath(model)
        raise ModelFileNotFoundError(f"model file not found: {path}")


def _proto(model: Any) -> tuple[Any, Path | None]:
    import onnx

    if isinstance(model, bytes | bytearray | memoryview):
        return onnx.load_model_from_string(bytes(model)), None
    if isinstance(model, str | os.PathLike):
        return onnx.load(os.fspath(model), load_external_data=False), Path(model).parent
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy, None


def _replace_initializers(graph: Any, values: dict[str, Any]) -> None:
    from onnx import numpy_helper

    index = {t.name: i for i, t in enumerate(graph.initializer)}
    inputs = {v.name for v in graph.input}
    for name, value in values.items():
        t = numpy_helper.from_array(np.ascontiguousarray(unwrap(value)), name)
        if name in index:
            graph.initializer[index[name]].CopyFrom(t)
        elif name in inputs:
            graph.initializer.append(t)
        else:
            raise InvalidGraphError(
                f"initializer '{name}' given in SessionOptions is neither an initializer nor "
                "an input of the model"
            )


def _inline_external(graph: Any, files: dict[str, bytes]) -> None:
    from onnx import TensorProto

    for t in graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        data = files.get(info.get("location", ""))
        if data is None:
            continue
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else len(data) - offset
        t.raw_data = data[offset : offset + length]
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT


def _override_dims(graph: Any, by_name: dict[str, int], by_denotation: dict[str, int]) -> None:
    for vi in graph.input:
        if not vi.type.HasField("tensor_type"):
            continue
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_value"):
                continue
            size = by_name.get(dim.dim_param, by_denotation.get(dim.denotation))
            if size is not None:
                dim.dim_value = size


def edits_model(options: SessionOptions) -> bool:
    """Whether `options` change the model before planning (load_for_session needed)."""
    o = options
    edits = o.initializers or o.external_files or o.dim_overrides_by_name
    return bool(edits or o.dim_overrides_by_denotation)


def load_for_session(model: Any, options: SessionOptions) -> Graph:
    """The model loaded with `options`' initializers, external files and dim overrides."""
    if isinstance(model, Graph):
        return model
    check_path(model)
    o = options
    proto, folder = _proto(model)
    _inline_external(proto.graph, o.external_files)
    _replace_initializers(proto.graph, o.initializers)
    _override_dims(proto.graph, o.dim_overrides_by_name, o.dim_overrides_by_denotation)
    return load_onnx(proto, base_dir=folder)


def _wants_model_config(options: SessionOptions) -> bool:
    return (
        os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL") == "1"
        or options.config_entries.get(LOAD_CONFIG_FROM_MODEL) == "1"
    )


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "intra_op_num_threads": int,
    "inter_op_num_threads": int,
    "execution_mode": lambda v: ExecutionMode(int(v)),
    "graph_optimization_level": lambda v: GraphOptimizationLevel(int(v)),
    "enable_profiling": lambda v: bool(int(v)),
    "use_deterministic_compute": lambda v: bool(int(v)),
    "enable_mem_pattern": lambda v: bool(int(v)),
    "enable_cpu_mem_arena": lambda v: bool(int(v)),
}


def options_from_model(metadata: Mapping[str, Any], options: SessionOptions) -> SessionOptions:
    """`options` updated with the model's "ort_config" session options, when asked for."""
    raw = dict(metadata.get("custom_metadata_map", {})).get("ort_config")
    if not raw or not _wants_model_config(options):
        return options
    try:
        cfg = json.loads(raw).get("session_options", {})
        updates = {k: _CONVERT[k](v) for k, v in cfg.items()}
    except (ValueError, KeyError, AttributeError) as e:
        raise ConfigError(f"the model's ort_config is not valid: {type(e).__name__}: {e}") from e
    return dataclasses.replace(options, **updates)


def save_optimized(graph: Graph, path: str, options: SessionOptions) -> None:
    """Write the optimized graph to `path`; with EXT_DATA_FILE set, initializers of at
    least EXT_DATA_MIN_SIZE bytes go to that file, next to `path`."""
    from onnxexec.ir.export import save_model

    location = options.config_entries.get(EXT_DATA_FILE)
    if not location:
        save_model(graph, path)
        return
    import onnx
    from onnx.external_data_helper import convert_model_to_external_data

    from onnxexec.ir.export import to_model

    min_size = int(options.config_entries.get(EXT_DATA_MIN_SIZE, "1024"))
    m = to_model(graph)
    convert_model_to_external_data(
        m, all_tensors_to_one_file=True, location=location, size_threshold=min_size
    )
    target = Path(path).parent / location
    if target.exists():  # onnx appends to an existing data file
        target.unlink()
    onnx.save_model(m, path)
