"""onnxruntime-compatible option objects and metadata records."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


@dataclass
class SessionOptions:
    """Mirrors onnxruntime.SessionOptions; fields onnxexec ignores are accepted."""

    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0
    graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
    execution_mode: ExecutionMode = ExecutionMode.ORT_SEQUENTIAL
    enable_profiling: bool = False
    profile_file_prefix: str = "onnxexec_profile"
    optimized_model_filepath: str = ""
    log_severity_level: int = 2
    log_verbosity_level: int = 0
    logid: str = ""
    enable_cpu_mem_arena: bool = True
    enable_mem_pattern: bool = True
    enable_mem_reuse: bool = True
    use_deterministic_compute: bool = False
    config_entries: dict[str, str] = field(default_factory=dict)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.config_entries[key] = value

    def get_session_config_entry(self, key: str) -> str:
        return self.config_entries[key]


@dataclass
class RunOptions:
    log_severity_level: int = 2
    log_verbosity_level: int = 0
    logid: str = ""
    run_tag: str = ""
    terminate: bool = False


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
