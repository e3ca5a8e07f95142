"""onnxruntime-format chrome-trace profiling (loadable in Perfetto / chrome://tracing).

Events follow onnxruntime's profiler: complete events ("ph": "X") in microseconds,
category "Session" for model_loading/session_initialization/model_run and "Node"
for each node as `<node name>_kernel_time`, with args op_name, provider and
input_type_shape / output_type_shape lists of {dtype: shape}.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np

from onnxexec.runtime.plan import Step

_DTYPE_NAMES = {"float32": "float", "float64": "double"}


def _type_shape(v: Any) -> dict[str, list[int]]:
    if isinstance(v, np.ndarray):
        return {_DTYPE_NAMES.get(v.dtype.name, v.dtype.name): list(v.shape)}
    if isinstance(v, list):
        return {"sequence": [len(v)]}
    return {"none" if v is None else type(v).__name__: []}


class Profiler:
    """Collects events; `node()` wraps one step, `span()` any session phase."""

    def __init__(self, prefix: str = "onnxexec_profile") -> None:
        self.prefix = prefix
        self.t0 = time.perf_counter()
        self.events: list[dict[str, Any]] = []
        self.pid = os.getpid()

    def _us(self, t: float) -> int:
        return int((t - self.t0) * 1e6)

    def add(
        self, cat: str, name: str, start: float, end: float, args: dict[str, Any] | None = None
    ) -> None:
        self.events.append(
            {
                "cat": cat,
                "pid": self.pid,
                "tid": 0,
                "dur": self._us(end) - self._us(start),
                "ts": self._us(start),
                "ph": "X",
                "name": name,
                "args": args or {},
            }
        )

    @contextmanager
    def span(self, cat: str, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(cat, name, start, time.perf_counter())

    @contextmanager
    def node(self, step: Step, vals: list[Any]) -> Iterator[None]:
        ins = [_type_shape(vals[s]) for s in step.ins if s >= 0]
        start = time.perf_counter()
        yield
        end = time.perf_counter()
        outs = [_type_shape(vals[s]) for s in step.outs if s >= 0]
        self.add(
            "Node",
            f"{step.node.label}_kernel_time",
            start,
            end,
            {
                "op_name": step.node.op_type,
                "provider": "CPUExecutionProvider",
                "input_type_shape": ins,
                "output_type_shape": outs,
            },
        )

    def op_table(self) -> list[tuple[str, float, int, float]]:
        """(op type, total ms, calls, share of node time), slowest first."""
        totals: dict[str, list[float]] = {}
        for e in self.events:
            if e["cat"] == "Node":
                t = totals.setdefault(e["args"]["op_name"], [0.0, 0])
                t[0] += e["dur"] / 1e3
                t[1] += 1
        all_ms = sum(t[0] for t in totals.values()) or 1.0
        rows = [(op, t[0], int(t[1]), t[0] / all_ms) for op, t in totals.items()]
        return sorted(rows, key=lambda r: -r[1])

    def format_table(self) -> str:
        lines = [f"{'op type':<28}{'total ms':>12}{'calls':>8}{'share':>9}"]
        for op, ms, calls, share in self.op_table():
            lines.append(f"{op:<28}{ms:>12.3f}{calls:>8}{share * 100:>8.1f}%")
        return "\n".join(lines)

    def write(self, path: str | None = None) -> str:
        if path is None:
            stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            path = f"{self.prefix}_{stamp}.json"
        # one event per line between "[" and "]", as onnxruntime writes its traces
        # (tools that read them line by line rely on it); still one JSON document
        with open(path, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(e) for e in self.events) + "\n]\n")
        return path
