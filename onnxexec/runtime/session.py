"""InferenceSession: a drop-in for onnxruntime.InferenceSession on the CPU."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from onnxexec.errors import InvalidFeedError, NodeExecutionError, RunTerminatedError
from onnxexec.ir.graph import Graph, ValueInfo
from onnxexec.ir.onnx_pb import ModelProto
from onnxexec.ir.types import TensorType
from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.passes import optimize
from onnxexec.passes.pack_weights import WeightOwnership
from onnxexec.runtime import threads
from onnxexec.runtime.executor import execute
from onnxexec.runtime.feeds import FeedChecker
from onnxexec.runtime.model_prep import (
    check_path,
    edits_model,
    load_for_session,
    options_from_model,
    save_optimized,
)
from onnxexec.runtime.options import ModelMetadata, NodeArg, RunOptions, SessionOptions
from onnxexec.runtime.ownership import OutputOwnership
from onnxexec.runtime.plan import plan_graph, topologically_sorted
from onnxexec.runtime.profiler import Profiler
from onnxexec.runtime.providers import get_all_providers, get_available_providers, resolve_providers
from onnxexec.runtime.readying import ready
from onnxexec.runtime.session_api import TERMINATED, OrtSessionAPI, RunWatch
from onnxexec.runtime.threads import set_threads
from onnxexec.runtime.validate import validate_graph

__all__ = ["InferenceSession", "get_all_providers", "get_available_providers", "get_device"]

log = logging.getLogger("onnxexec")


def get_device() -> str:
    return "CPU"


def _node_arg(v: ValueInfo) -> NodeArg:
    t = v.type
    shape: list[int | str | None] = []
    if isinstance(t, TensorType) and t.shape is not None:
        shape = list(t.shape)
    return NodeArg(v.name, str(t) if t is not None else "unknown", shape)


# Replaced weights a session may keep alive in its copy of the loaded graph.
_KEEP_BYTES = 1 << 20


def _reloadable(source: object) -> bool:
    """Sources that give the same graph when loaded again (a Graph is the caller's own
    object: dropping our reference frees nothing)."""
    return isinstance(source, str | os.PathLike | bytes | ModelProto)


def _replaced_bytes(loaded: Graph, optimized: Graph) -> int:
    """Bytes of the loaded graph's initializers the optimized graph no longer uses."""
    kept = {id(v) for v in optimized.initializers.values()}
    return sum(
        v.nbytes
        for v in loaded.initializers.values()
        if isinstance(v, np.ndarray) and id(v) not in kept
    )


def load_graph(model: str | os.PathLike | bytes | ModelProto | Graph) -> Graph:
    if isinstance(model, Graph):
        return model
    check_path(model)
    return load_onnx(model)


def _load(model: Any, options: SessionOptions) -> Graph:
    return load_for_session(model, options) if edits_model(options) else load_graph(model)


class InferenceSession(OrtSessionAPI):
    """Load, plan once, then run many times.

    `providers` / `provider_options` are taken as onnxruntime takes them: providers it
    knows but onnxexec lacks (CUDA, TensorRT, ...) are skipped with a warning and the
    session runs on the CPU; an unknown name falls back to the CPU with a warning.
    """

    def __init__(
        self,
        path_or_bytes: str | os.PathLike | bytes | ModelProto | Graph,
        sess_options: SessionOptions | None = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        options = sess_options or SessionOptions()
        self._enable_fallback = True
        self._providers = resolve_providers(
            providers if providers is not None else options.providers or None,
            provider_options,
            fallback=True,
        )
        self._model_path = path_or_bytes if isinstance(path_or_bytes, str | os.PathLike) else None
        t_load = time.perf_counter()
        log.info("Loading model %s", self._model_path or type(path_or_bytes).__name__)
        loaded = _load(path_or_bytes, options)
        self._options = options = options_from_model(loaded.metadata, options)
        self._profiling_start_ns = time.time_ns() if options.enable_profiling else 0
        self._profiler = Profiler(options.profile_file_prefix) if options.enable_profiling else None
        if self._profiler is not None:
            self._profiler.t0 = t_load
            self._profiler.add("Session", "model_loading_uri", t_load, time.perf_counter())
        level = int(options.graph_optimization_level)
        # BLAS keeps the session's thread count at every level: forcing it single-threaded
        # under the fused kernels changed conv summation order enough to flip the
        # ill-conditioned light/test_squeezenet case (logits ~1e10 equal to the last bit).
        set_threads(options.intra_op_num_threads, blas_threads=1 if level >= 2 else None)
        loaded = topologically_sorted(loaded)
        # onnx's strict inference reads the source itself: skip it when the options
        # changed the model (initializers, dimension overrides) after reading it.
        validate_graph(loaded, None if edits_model(options) else path_or_bytes)
        # A graph we loaded ourselves is ours: the layout passes may pack its weights
        # over their own bytes rather than next to them (peak RSS: one model, not two).
        owner = WeightOwnership() if _reloadable(path_or_bytes) else None
        with self._span("session_initialization"):
            self._optimized = optimize(loaded, level, owner)
            if options.optimized_model_filepath:  # imports onnx: only when asked
                save_optimized(self._optimized, options.optimized_model_filepath, options)
            self._plan = plan_graph(self._optimized, level)
        self._own_outputs = OutputOwnership(self._plan)
        threads.apply_pending()  # planning imported the kernels the model uses
        self._inputs = loaded.runtime_inputs()
        inits = loaded.initializers
        self._defaults = {v.name: inits[v.name] for v in loaded.inputs if v.name in inits}
        self._all_inputs = tuple(loaded.inputs)
        self._check_feeds = FeedChecker(self._all_inputs, self._defaults)
        self._outputs = tuple(loaded.outputs)
        self._out_index = {v.name: i for i, v in enumerate(self._outputs)}
        self._metadata = loaded.metadata
        self._graph_name = loaded.name
        # The loaded graph still holds every weight the optimizer replaced (folded,
        # fused, pre-packed): a second copy of the model. Keep it only when that costs
        # little or cannot be re-read; `graph` loads it again on demand otherwise. Once
        # weights were packed over their bytes it is spent, and always dropped.
        self._graph: Graph | None = loaded
        self._source: Any = None
        if owner is not None and (
            owner.consumed or _replaced_bytes(loaded, self._optimized) > _KEEP_BYTES
        ):
            self._graph, self._source = None, path_or_bytes
        # every kernel a run can take, linked or compiled now (runtime/readying.py)
        what = os.path.basename(os.fspath(self._model_path or "model"))
        ready(lambda f: execute(self._plan, self._check_feeds(f)), self._inputs, what,
              self._model_path)  # fmt: skip
        log.info("Session initialized: %d nodes planned", len(self._optimized.nodes))

    @property
    def graph(self) -> Graph:
        """The graph as loaded (before optimization), re-read from the source if dropped."""
        if self._graph is None:
            self._graph = _load(self._source, self._options)
        return self._graph

    @property
    def graph_inputs(self) -> tuple[ValueInfo, ...]:
        """Every declared graph input, initializer-backed ones included (`graph.inputs`
        without re-reading a dropped graph)."""
        return self._all_inputs

    @property
    def runtime_inputs(self) -> tuple[ValueInfo, ...]:
        """Inputs without an initializer of the same name (`graph.runtime_inputs()`)."""
        return self._inputs

    @property
    def optimized_graph(self) -> Graph:
        """The graph the session runs (after graph_optimization_level's passes)."""
        return self._optimized

    def get_inputs(self) -> list[NodeArg]:
        return [_node_arg(v) for v in self._inputs]

    def get_outputs(self) -> list[NodeArg]:
        return [_node_arg(v) for v in self._outputs]

    def get_overridable_initializers(self) -> list[NodeArg]:
        return [_node_arg(v) for v in self._all_inputs if v.name in self._defaults]

    def get_modelmeta(self) -> ModelMetadata:
        m = self._metadata
        return ModelMetadata(
            producer_name=m.get("producer_name", ""),
            graph_name=m.get("graph_name", self._graph_name),
            domain=m.get("domain", ""),
            description=m.get("doc_string", ""),
            graph_description=m.get("graph_description", ""),
            version=int(m.get("model_version", 0)),
            custom_metadata_map=dict(m.get("custom_metadata_map", {})),
        )

    def get_session_options(self) -> SessionOptions:
        return self._options

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[Any]:
        """Outputs named by `output_names` (all when None/empty), in that order."""
        if output_names:
            bad = [n for n in output_names if n not in self._out_index]
            if bad:
                raise InvalidFeedError(
                    f"unknown output name(s) {bad}; the model's outputs are {list(self._out_index)}"
                )
        if run_options is not None and run_options.active_adapters:
            from onnxexec.runtime.adapters import adapter_feeds

            input_feed = {**adapter_feeds(run_options.active_adapters), **input_feed}
        feeds = self._check_feeds(input_feed)
        watch = self._profiler
        if run_options is not None:
            if run_options.terminate:
                raise RunTerminatedError(TERMINATED)
            watch = RunWatch(run_options, self._profiler)
        try:
            if watch is None:
                results = execute(self._plan, feeds)
            else:
                with self._span("model_run"):
                    results = execute(self._plan, feeds, profiler=watch)
        except NodeExecutionError as e:
            if isinstance(e.__cause__, RunTerminatedError):
                raise e.__cause__ from None
            raise
        # numba may have come in with a kernel a handler imports when run (ml_scores'
        # kernels are serial: that first run did not depend on the count); a no-op after
        threads.apply_pending()
        if output_names:
            results = [results[self._out_index[n]] for n in output_names]
        return self._own_outputs(results, feeds)

    def _span(self, name: str) -> Any:
        return self._profiler.span("Session", name) if self._profiler else nullcontext()

    @property
    def profiler(self) -> Profiler | None:
        return self._profiler

    def end_profiling(self) -> str:
        """Write the chrome-trace JSON and return its path ('' when profiling is off)."""
        if self._profiler is None:
            return ""
        path = self._profiler.write()
        self._profiler = None
        return path
