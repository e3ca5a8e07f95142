"""The parts of onnxruntime's InferenceSession API beyond load-and-run.

`OrtSessionAPI` is a mixin of InferenceSession: OrtValue runs, IOBinding, run_async,
providers and fallback, profiling start time, memory infos, EP assignment records.
It also holds `RunWatch`, which makes `RunOptions.terminate` stop a run between two
nodes with onnxruntime's error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from onnxexec.errors import Fail, RunTerminatedError
from onnxexec.runtime.devices import OrtMemoryInfo, cpu_memory_info
from onnxexec.runtime.iobinding import IOBinding
from onnxexec.runtime.options import RECORD_EP_ASSIGNMENT, RunOptions
from onnxexec.runtime.ortvalue import OrtValue, OrtValueVector
from onnxexec.runtime.providers import CPU, resolve_providers

TERMINATED = "Exiting due to terminate flag being set to true."
_NO_PROFILE = nullcontext()


class RunWatch:
    """Stands in for the profiler in the executor's instrumented loop: before each node
    it checks `run_options.terminate` (set from another thread) and forwards to the
    real profiler, if any."""

    def __init__(self, run_options: RunOptions, profiler: Any) -> None:
        self.run_options = run_options
        self.profiler = profiler

    def node(self, step: Any, vals: list[Any]) -> AbstractContextManager[Any]:
        if self.run_options.terminate:
            raise RunTerminatedError(TERMINATED)
        # a shared no-op context when not profiling: this runs once per node
        return _NO_PROFILE if self.profiler is None else self.profiler.node(step, vals)


@dataclass(frozen=True)
class OrtEpAssignedNode:
    name: str
    domain: str
    op_type: str


@dataclass(frozen=True)
class OrtEpAssignedSubgraph:
    ep_name: str
    nodes: tuple[OrtEpAssignedNode, ...]

    def get_nodes(self) -> list[OrtEpAssignedNode]:
        return list(self.nodes)


class _CSession:
    """What onnxruntime's `session._sess` (the pybind session) offers programs."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def run_with_ort_values(
        self, feeds: Mapping[str, OrtValue], output_names: Sequence[str], run_options: Any = None
    ) -> OrtValueVector:
        return OrtValueVector(self._session.run_with_ort_values(output_names, feeds, run_options))

    def run(
        self, output_names: Sequence[str], feeds: Mapping[str, Any], run_options: Any = None
    ) -> list[Any]:
        return self._session.run(output_names, feeds, run_options)


class OrtSessionAPI:
    """onnxruntime InferenceSession methods built on `run` (see the module docstring)."""

    _options: Any
    _profiler: Any
    _profiling_start_ns: int
    _providers: dict[str, dict[str, str]]
    _enable_fallback: bool
    run: Callable[..., list[Any]]

    @property
    def _sess(self) -> _CSession:
        return _CSession(self)

    def run_with_ort_values(
        self,
        output_names: Sequence[str] | None,
        input_dict_ortvalue: Mapping[str, OrtValue],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """run() taking and returning OrtValues."""
        return [OrtValue(v) for v in self.run(output_names, input_dict_ortvalue, run_options)]

    def run_async(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        callback: Callable[[list[Any], Any, str], None],
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """Run on a new thread; then call `callback(results, user_data, error_text)`
        (results empty and error_text set when the run failed)."""

        def work() -> None:
            try:
                results = self.run(output_names, input_feed, run_options)
            except Exception as e:
                callback([], user_data, f"{type(e).__name__}: {e}")
                return
            callback(results, user_data, "")

        threading.Thread(target=work, name="onnxexec-run-async", daemon=True).start()

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run_with_iobinding(
        self, iobinding: IOBinding, run_options: RunOptions | None = None
    ) -> None:
        iobinding.run(run_options)

    # --- providers ------------------------------------------------------------------
    def get_providers(self) -> list[str]:
        return list(self._providers)

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {k: dict(v) for k, v in self._providers.items()}

    def set_providers(
        self, providers: Sequence[Any] | None = None, provider_options: Sequence[Any] | None = None
    ) -> None:
        """Choose providers again (raises for a name onnxruntime does not know)."""
        self._providers = resolve_providers(providers, provider_options, fallback=False)

    def disable_fallback(self) -> None:
        self._enable_fallback = False

    def enable_fallback(self) -> None:
        self._enable_fallback = True

    def get_input_memory_infos(self) -> list[OrtMemoryInfo]:
        return [cpu_memory_info() for _ in self.get_inputs()]  # type: ignore[attr-defined]

    def get_output_memory_infos(self) -> list[OrtMemoryInfo]:
        return [cpu_memory_info() for _ in self.get_outputs()]  # type: ignore[attr-defined]

    def get_input_epdevices(self) -> list[None]:
        """One entry per input; None: no plugin execution-provider device is involved."""
        return [None for _ in self.get_inputs()]  # type: ignore[attr-defined]

    def get_provider_graph_assignment_info(self) -> list[OrtEpAssignedSubgraph]:
        """Each node of the model as its own CPU subgraph (needs the session config
        entry "session.record_ep_graph_assignment_info" = "1", as onnxruntime). The
        model's nodes, not the fused ones they became: all of them run on the CPU."""
        if self._options.config_entries.get(RECORD_EP_ASSIGNMENT) != "1":
            raise Fail(
                f"Session configuration entry '{RECORD_EP_ASSIGNMENT}' must be set to \"1\" "
                "to retrieve EP graph assignment information."
            )
        graph = self.graph  # type: ignore[attr-defined]
        return [
            OrtEpAssignedSubgraph(CPU, (OrtEpAssignedNode(n.name, n.domain, n.op_type),))
            for n in graph.nodes
        ]

    def get_tuning_results(self) -> list[dict[str, Any]]:
        """No tunable kernels: nothing recorded."""
        return []

    def set_tuning_results(self, results: Sequence[Any], error_on_invalid: bool = False) -> None:
        """Accepted: onnxexec has no tunable ops to load results into."""

    # --- profiling ------------------------------------------------------------------
    def get_profiling_start_time_ns(self) -> int:
        """Wall-clock start of profiling (time.time_ns()), 0 when profiling is off."""
        return self._profiling_start_ns
