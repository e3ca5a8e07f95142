"""onnxexec vs onnxruntime on one ONNX model: same inputs, same thread count,
interleaved runs in one process; peak RSS measured in a child process per engine."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from onnxexec.errors import OnnxExecError
from onnxexec.ops.registry import all_handlers
from onnxexec.runtime.options import SessionOptions
from onnxexec.runtime.session import InferenceSession
from onnxexec.runtime.threads import set_threads


@dataclass
class EngineResult:
    name: str
    create_s: float
    times_s: list[float] = field(default_factory=list)
    peak_rss_mb: float = float("nan")

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_s) * 1e3

    @property
    def p90_ms(self) -> float:
        return float(np.percentile(self.times_s, 90)) * 1e3


@dataclass
class BenchResult:
    model: str
    engines: list[EngineResult]
    max_abs_diff: dict[str, float] = field(default_factory=dict)

    def ratio(self) -> float:
        """onnxexec median / anchor median (< 1 means onnxexec is faster)."""
        return self.engines[0].median_ms / self.engines[1].median_ms


SETTLE_S: Final = 0.1  # pause before each timed run (see bench_onnx)


def _ort_session(model: str, threads: int) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise OnnxExecError("--vs onnxruntime needs the onnxruntime package installed") from e
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _timed(make: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    obj = make()
    return obj, time.perf_counter() - t


def _max_abs_diff(a: Any, b: Any) -> float:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):  # sequences (ZipMap)
        if len(a) != len(b):
            return float("inf")
        return max((_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return float("inf")
        return max((_max_abs_diff(a[k], b[k]) for k in a), default=0.0)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    if a.dtype.kind in "OUS" or a.size == 0:
        return 0.0 if np.array_equal(a, b) else float("inf")
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def peak_rss_mb(
    engine: str, model: str, feed_path: str, threads: int, runs: int = 3, level: int = 99
) -> float:
    """Peak RSS (MB) of a fresh process that creates the session and runs it.

    Measured in the second such process: the first one after an install or an upgrade
    compiles kernels into numba's cache and records them for kernels/objload (a
    benchmarking process imports numba up front, so it records nothing), and it is a
    warm process that serves a model."""
    code = (
        "import resource, sys, numpy as np\n"
        f"feed = dict(np.load({feed_path!r}, allow_pickle=False))\n"
        f"engine, model, threads = {engine!r}, {model!r}, {threads}\n"
        "if engine == 'onnxruntime':\n"
        "    import onnxruntime as ort\n"
        "    so = ort.SessionOptions(); so.intra_op_num_threads = threads\n"
        "    s = ort.InferenceSession(model, so, providers=['CPUExecutionProvider'])\n"
        "else:\n"
        "    import onnxexec\n"
        "    s = onnxexec.InferenceSession(model, onnxexec.SessionOptions("
        f"intra_op_num_threads=threads, graph_optimization_level={int(level)}))\n"
        f"for _ in range({runs}): s.run(None, feed)\n"
        # VmHWM is this process's own peak: ru_maxrss survives exec on Linux and would
        # report the (large) benchmarking parent that forked us.
        "try:\n"
        "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "    print(int(hwm.split()[1]) / 1024)\n"
        "except OSError:\n"
        "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    for _warm in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=1800,
            env=dict(os.environ),
        )
        if out.returncode != 0:
            return float("nan")
    return float(out.stdout.strip().splitlines()[-1])


CREATE_ROUNDS: Final = 3
# creations under 50 ms (the scikit-learn models: ~1 ms) take more rounds: one
# scheduler hiccup or collection is a large share of them (3 rounds measured ratios
# of 1.2 to 2.7 for the same model from run to run)
CREATE_ROUNDS_FAST: Final = 9
_FAST_CREATE_S: Final = 0.05


def _create(makers: dict[str, Callable[[], Any]]) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Each engine's session created CREATE_ROUNDS times (CREATE_ROUNDS_FAST when both
    take under 50 ms), the order alternating; the median time counts and the last
    sessions are kept.

    On this VM, memory a process touches for the first time costs ~7 us per 4 KB page
    (0.14-0.4 GB/s), and whoever allocates first after another model's memory was
    freed pays for it: one creation of ViT varied from 0.47 to 1.7 s with the state of
    the machine's pages, so a single creation of each engine, always in the same order,
    compared page-fault luck rather than the engines."""
    sessions: dict[str, Any] = {}
    times: dict[str, list[float]] = {name: [] for name in makers}
    names = list(makers)
    rounds = CREATE_ROUNDS
    rnd = 0
    while rnd < rounds:
        for name in names if rnd % 2 == 0 else names[::-1]:
            sessions.pop(name, None)  # free the previous one first, as a new process would
            sessions[name], t = _timed(makers[name])
            times[name].append(t)
        if rnd == 0 and max(t[0] for t in times.values()) < _FAST_CREATE_S:
            rounds = CREATE_ROUNDS_FAST
        rnd += 1
    return sessions, times


def bench_onnx(
    model: str,
    feed: dict[str, Any],
    *,
    threads: int = 2,
    runs: int = 20,
    warmup: int = 3,
    vs: str | None = "onnxruntime",
    memory: bool = True,
    feed_path: str | None = None,
    level: int = 99,
    settle_s: float = SETTLE_S,
) -> BenchResult:
    """Interleave runs of each engine so machine noise hits both equally.

    `level` is onnxexec's graph_optimization_level (onnxruntime keeps its default).
    Each timed run starts `settle_s` after the previous one ended, so it is timed as it
    runs alone: onnxruntime's pool threads keep spinning after a run (~40 ms of CPU,
    measured here), which took one of the two cores from whichever engine ran next.
    """
    opts = SessionOptions(intra_op_num_threads=threads, graph_optimization_level=level)
    # Once per process, as importing onnxruntime loads its library: the op registry
    # imports every handler module, and the first thread setup starts numba (its
    # first dispatch imports scipy.linalg when installed). Creation time is then what
    # each session costs.
    all_handlers()
    set_threads(threads, blas_threads=1 if level >= 2 else None)
    makers: dict[str, Callable[[], Any]] = {"onnxexec": lambda: InferenceSession(model, opts)}
    if vs == "onnxruntime":
        makers["onnxruntime"] = lambda: _ort_session(model, threads)
    elif vs:
        raise OnnxExecError(f"unknown anchor '{vs}'; use onnxruntime")
    sessions, created = _create(makers)
    engines = [EngineResult(name, statistics.median(created[name])) for name in makers]
    runners: list[Callable[[], list[Any]]] = [
        (lambda s=sessions[name]: s.run(None, feed)) for name in makers
    ]
    ours = sessions["onnxexec"]
    outputs = [r() for r in runners]
    for _ in range(max(warmup - 1, 0)):
        for r in runners:
            r()
    for _ in range(runs):
        for eng, r in zip(engines, runners, strict=True):
            time.sleep(settle_s)
            t = time.perf_counter()
            r()
            eng.times_s.append(time.perf_counter() - t)
    result = BenchResult(model, engines)
    if len(outputs) == 2:
        names = [o.name for o in ours.get_outputs()]
        for n, a, b in zip(names, outputs[0], outputs[1], strict=True):
            result.max_abs_diff[n] = _max_abs_diff(a, b)
    if memory and feed_path:
        for eng in engines:
            eng.peak_rss_mb = peak_rss_mb(eng.name, model, feed_path, threads, level=level)
    return result


def format_result(r: BenchResult) -> list[str]:
    lines = [f"{'engine':<14}{'create ms':>11}{'median ms':>11}{'p90 ms':>10}{'peak RSS MB':>13}"]
    for e in r.engines:
        lines.append(
            f"{e.name:<14}{e.create_s * 1e3:>11.1f}{e.median_ms:>11.3f}{e.p90_ms:>10.3f}"
            f"{e.peak_rss_mb:>13.1f}"
        )
    if len(r.engines) == 2:
        a, b = r.engines
        lines.append(
            f"ratio onnxexec/onnxruntime: latency {r.ratio():.3f}x  "
            f"creation {a.create_s / b.create_s:.2f}x  "
            f"peak RSS {a.peak_rss_mb / b.peak_rss_mb:.2f}x"
        )
        diffs = ", ".join(f"{k} {v:.3g}" for k, v in r.max_abs_diff.items())
        lines.append(f"max abs diff: {diffs}")
    return lines


def to_json(r: BenchResult) -> str:
    return json.dumps(
        {
            "model": r.model,
            "engines": [
                {
                    "name": e.name,
                    "create_ms": e.create_s * 1e3,
                    "median_ms": e.median_ms,
                    "p90_ms": e.p90_ms,
                    "peak_rss_mb": e.peak_rss_mb,
                }
                for e in r.engines
            ],
            "ratio": r.ratio() if len(r.engines) == 2 else None,
            "max_abs_diff": r.max_abs_diff,
        }
    )
