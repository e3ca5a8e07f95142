"""onnxruntime-compatible option objects and metadata records.

Options onnxexec has no use for are accepted and kept, so programs written for
onnxruntime run unchanged: `inter_op_num_threads`, `execution_mode` (nodes run one
after another), `enable_mem_pattern`, `enable_mem_reuse`, `enable_cpu_mem_arena`
(numpy allocates), `use_deterministic_compute` (results are already deterministic
for a fixed thread count), `log_verbosity_level`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from onnxexec.errors import ConfigError, UnsupportedOpError


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


# Session config keys onnxexec reads (onnxruntime_session_options_config_keys.h names).
EXT_DATA_FILE = "session.optimized_model_external_initializers_file_name"
EXT_DATA_MIN_SIZE = "session.optimized_model_external_initializers_min_size_in_bytes"
LOAD_CONFIG_FROM_MODEL = "session.load_config_from_model"
RECORD_EP_ASSIGNMENT = "session.record_ep_graph_assignment_info"


def _config_error(owner: str, key: str) -> ConfigError:
    return ConfigError(f"{owner} does not have configuration with key: {key}")


@dataclass
class SessionOptions:
    """Mirrors onnxruntime.SessionOptions; fields onnxexec ignores are accepted."""

    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0
    graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
    execution_mode: ExecutionMode = ExecutionMode.ORT_SEQUENTIAL
    execution_order: int = 0
    enable_profiling: bool = False
    profile_file_prefix: str = "onnxexec_profile"
    optimized_model_filepath: str = ""
    log_severity_level: int = -1
    log_verbosity_level: int = 0
    logid: str = ""
    enable_cpu_mem_arena: bool = True
    enable_mem_pattern: bool = True
    enable_mem_reuse: bool = True
    use_deterministic_compute: bool = False
    use_per_session_threads: bool = True
    config_entries: dict[str, str] = field(default_factory=dict)
    # name -> array replacing (add_initializer) or supplying (external) an initializer
    initializers: dict[str, Any] = field(default_factory=dict)
    # external-data file name -> its bytes (add_external_initializers_from_files_in_memory)
    external_files: dict[str, bytes] = field(default_factory=dict)
    dim_overrides_by_name: dict[str, int] = field(default_factory=dict)
    dim_overrides_by_denotation: dict[str, int] = field(default_factory=dict)
    providers: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.config_entries[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        if key not in self.config_entries:
            raise _config_error("SessionOptions", key)
        return self.config_entries[key]

    def add_initializer(self, name: str, value: Any) -> None:
        """Use `value` (an OrtValue or array) for initializer `name` instead of the model's."""
        self.initializers[name] = value

    def add_external_initializers(self, names: Sequence[str], values: Sequence[Any]) -> None:
        """Supply initializers whose data the model stores externally (or replace any)."""
        if len(names) != len(values):
            raise ConfigError(f"{len(names)} names for {len(values)} initializer values")
        self.initializers.update(zip(names, values, strict=True))

    def add_external_initializers_from_files_in_memory(
        self, names: Sequence[str], buffers: Sequence[Any], lengths: Sequence[int]
    ) -> None:
        """Give the bytes of external-data files the model names, instead of reading them."""
        if not len(names) == len(buffers) == len(lengths):
            raise ConfigError("names, buffers and lengths must have the same length")
        for name, buf, n in zip(names, buffers, lengths, strict=True):
            self.external_files[str(name)] = bytes(memoryview(buf).cast("B")[: int(n)])

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix symbolic dimension `dim_name` (a dim_param) to `dim_value` in every input."""
        self.dim_overrides_by_name[dim_name] = int(dim_value)

    def add_free_dimension_override_by_denotation(
        self, dim_denotation: str, dim_value: int
    ) -> None:
        """Fix every free dimension whose denotation is `dim_denotation` (e.g. DATA_BATCH)."""
        self.dim_overrides_by_denotation[dim_denotation] = int(dim_value)

    def register_custom_ops_library(self, library_path: str) -> None:
        raise UnsupportedOpError(
            f"custom op library '{library_path}': onnxexec cannot load onnxruntime custom-op "
            "C libraries (register Python handlers with onnxexec.ops.registry.op instead)"
        )

    def add_provider(self, provider_name: str, provider_options: dict[str, str]) -> None:
        self.providers.append((provider_name, dict(provider_options)))

    def has_providers(self) -> bool:
        return bool(self.providers)

    def set_provider_selection_policy(self, policy: Any) -> None:
        """Accepted: every policy selects the CPU, the only device onnxexec has."""

    def set_load_cancellation_flag(self, value: bool) -> None:
        """Accepted: loading is not cancellable (it is not run on another thread)."""


@dataclass
class RunOptions:
    log_severity_level: int = 2
    log_verbosity_level: int = 0
    logid: str = ""
    run_tag: str = ""
    terminate: bool = False
    only_execute_path_to_fetches: bool = False
    config_entries: dict[str, str] = field(default_factory=dict)
    active_adapters: list[Any] = field(default_factory=list)

    def add_run_config_entry(self, key: str, value: str) -> None:
        self.config_entries[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        if key not in self.config_entries:
            raise _config_error("RunOptions", key)
        return self.config_entries[key]

    def add_active_adapter(self, adapter: Any) -> None:
        self.active_adapters.append(adapter)


@dataclass(frozen=True)
class NodeArg:
    """An input/output description: `.shape` holds ints, symbolic names or None."""

    name: str
    type: str
    shape: list[int | str | None]

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


@dataclass(frozen=True)
class ModelMetadata:
    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: dict[str, str] = field(default_factory=dict)
