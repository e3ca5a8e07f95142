"""onnxexec vs llama.cpp on one GGUF model: the same prompt ids, greedy decoding, the
same thread count, rounds interleaved so machine noise hits both. llama.cpp runs in a
worker process of its own (llama_cpp_worker.py): in one process the two engines share
libgomp and its wait policy, and either one's tuning slows the other.

Per engine: prefill tok/s (one `prompt_len`-token prompt), decode tok/s (`n_decode`
greedy tokens), time to first token in-process (prefill + argmax) and from a fresh
process (start, import, load, prefill: what `onnxexec generate` costs), peak RSS of
that child process. Plus the greedy-ids agreement, and for onnxexec a per-op-type
profile of one decode step: kernel time per op type, and executor overhead = the
step's wall time (unprofiled) minus the sum of the op times (profiled).

llama.cpp runs through llama-cpp-python (`llama_cpp.Llama`), never imported by onnxexec.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from onnxexec.errors import OnnxExecError

PROMPT_TEXT = (
    "The history of computing is a story of abstraction. Early machines were wired by "
    "hand for each problem; stored programs let the same hardware run any algorithm, and "
    "compilers let people describe algorithms without thinking about registers. Each "
    "layer hid the one below it and made the next generation of software possible. "
)


@dataclass
class EngineRun:
    name: str
    load_s: float = float("nan")
    prefill_tok_s: list[float] = field(default_factory=list)
    decode_tok_s: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)  # in-process: prefill + argmax
    greedy_ids: list[int] = field(default_factory=list)
    process_ttft_s: float = float("nan")  # fresh process start -> first token
    peak_rss_mb: float = float("nan")

    def med(self, key: str) -> float:
        vals = getattr(self, key)
        return statistics.median(vals) if vals else float("nan")


@dataclass
class GGUFBenchResult:
    model: str
    threads: int
    prompt_len: int
    n_decode: int
    engines: list[EngineRun]
    file_mb: float = 0.0
    kv_cache_mb: float = 0.0
    greedy_equal: int = -1  # ids equal position by position
    greedy_prefix: int = -1  # leading ids equal
    profile: list[tuple[str, float, int, float]] = field(default_factory=list)
    step_wall_ms: float = float("nan")
    step_ops_ms: float = float("nan")

    def ratio(self, key: str) -> float:
        """onnxexec / llama.cpp (> 1 means onnxexec is faster, for tok/s)."""
        a, b = self.engines[0].med(key), self.engines[1].med(key)
        return a / b if b else float("nan")


def prompt_ids(tokenizer: Any, n: int) -> list[int]:
    """`n` ids: the tokenizer's BOS (when the model adds one), then PROMPT_TEXT repeated."""
    body = tokenizer.encode(PROMPT_TEXT, add_special=False)
    ids = [tokenizer.bos_id] if tokenizer.add_bos and tokenizer.bos_id is not None else []
    while len(ids) < n:
        ids += body
    return ids[:n]


class _Ours:
    def __init__(self, model: str, n_ctx: int, threads: int) -> None:
        from onnxexec.llm.model import LLM

        self.llm = LLM(model, n_ctx=n_ctx, threads=threads)

    def reset(self) -> None:
        self.llm.reset()

    def eval_last(self, ids: list[int]) -> np.ndarray:
        return self.llm.eval(ids)[-1]


class _LlamaCpp:
    """llama.cpp in a worker process of its own (see llama_cpp_worker.py for why)."""

    def __init__(self, model: str, n_ctx: int, threads: int) -> None:
        try:
            import llama_cpp  # noqa: F401  (only checks that it is installed)
        except ImportError as e:
            raise OnnxExecError(
                "--vs llama.cpp needs llama-cpp-python (pip install llama-cpp-python)"
            ) from e
        from onnxexec.runtime.threads import OWN_ENV

        env = {k: v for k, v in os.environ.items() if OWN_ENV.get(k) != v}
        script = os.path.join(os.path.dirname(__file__), "llama_cpp_worker.py")
        self.proc = subprocess.Popen(
            [sys.executable, script, model, str(n_ctx), str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.load_s = float(self._reply()["load_s"])

    def _reply(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read().strip().splitlines() if self.proc.stderr else []
            raise OnnxExecError(f"llama.cpp worker failed: {(err or ['no output'])[-1]}")
        return json.loads(line)

    def round(self, ids: list[int], n_decode: int) -> tuple[float, float, list[int]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"ids": ids, "n_decode": n_decode}) + "\n")
        self.proc.stdin.flush()
        r = self._reply()
        return r["prefill_s"], r["decode_s"], r["ids"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _ours_round(engine: _Ours, ids: list[int], n_decode: int) -> tuple[float, float, list[int]]:
    """One timed prefill + greedy decode: (prefill s, decode s, greedy ids)."""
    engine.reset()
    t0 = time.perf_counter()
    out = [int(np.argmax(engine.eval_last(ids)))]
    t1 = time.perf_counter()
    for _ in range(n_decode - 1):
        out.append(int(np.argmax(engine.eval_last([out[-1]]))))
    return t1 - t0, time.perf_counter() - t1, out


def _record(run: EngineRun, n_prompt: int, n_decode: int, r: tuple[float, float, list]) -> None:
    prefill_s, decode_s, ids = r
    run.prefill_tok_s.append(n_prompt / prefill_s)
    run.ttft_ms.append(prefill_s * 1e3)
    if n_decode > 1:
        run.decode_tok_s.append((n_decode - 1) / decode_s)
    run.greedy_ids = ids


def profile_decode_step(llm: Any, token: int, reps: int = 10) -> tuple[list, float, float]:
    """(op table, step wall ms, sum of op ms) of one T=1 step at the current position.

    The wall time is the fastest of `reps` unprofiled llm.eval calls, the op times those
    of the fastest profiled run (so neither includes the profiler's own bookkeeping, and
    both are the least disturbed by other processes).
    """
    from onnxexec.runtime.executor import execute
    from onnxexec.runtime.profiler import Profiler

    n = llm.n_past
    walls = []
    for _ in range(reps):
        t = time.perf_counter()
        llm.eval([token])
        walls.append(time.perf_counter() - t)
        llm.rewind(n)
    plan = llm.plan(True)
    feeds = dict(llm._feeds, tokens=np.asarray([token], np.int64), pos=np.asarray(n, np.int64))
    best: Any = None
    for _ in range(reps):
        prof = Profiler()
        execute(plan, feeds, profiler=prof)
        table = prof.op_table()
        if best is None or sum(r[1] for r in table) < sum(r[1] for r in best):
            best = table
    return best, min(walls) * 1e3, sum(r[1] for r in best)


_CHILD = """
import resource, sys, time
t_start = float(sys.argv[1])
engine, model, threads, n_ctx, n_decode = sys.argv[2], sys.argv[3], int(sys.argv[4]), \\
    int(sys.argv[5]), int(sys.argv[6])
ids = [int(t) for t in sys.argv[7].split(",")]
import numpy as np
if engine == "onnxexec":
    from onnxexec.llm.model import LLM
    llm = LLM(model, n_ctx=n_ctx, threads=threads)
    step = lambda toks: llm.eval(toks)[-1]
else:  # no onnxexec import: its modules would count in llama.cpp's RSS
    import llama_cpp
    llm = llama_cpp.Llama(model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                          n_batch=512, verbose=False)
    def step(toks):
        llm.eval(toks)
        return np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
tok = int(np.argmax(step(ids)))
ttft = time.time() - t_start
for _ in range(n_decode - 1):
    tok = int(np.argmax(step([tok])))
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so it would report the
# parent's (the benchmark process's) peak
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
rss = int(hwm[0].split()[1]) / 1024 if hwm else \\
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(ttft, rss)
"""


def child_run(
    engine: str, model: str, threads: int, n_ctx: int, ids: list[int], n_decode: int
) -> tuple[float, float]:
    """(seconds from process start to the first token, peak RSS MB) of a fresh process.

    A warm start, as an installed package sees it: the numba cache is present (the
    parent ran every kernel) and onnxexec's modules are byte-compiled. Under
    PYTHONDONTWRITEBYTECODE (set in some sandboxes and CI) Python never writes .pyc
    files, so each child would compile ~150 source files (~0.3 s) that pip compiles
    once at install; the llama.cpp child imports pip-installed, compiled modules.
    """
    if engine == "onnxexec":
        import compileall

        import onnxexec

        compileall.compile_dir(os.path.dirname(onnxexec.__file__), quiet=2)
    args = [
        str(time.time()),
        engine,
        model,
        str(threads),
        str(n_ctx),
        str(n_decode),
        ",".join(map(str, ids)),
    ]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        timeout=1800,
        env=dict(os.environ),
    )
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or ["no output"]
        raise OnnxExecError(f"{engine} child process failed: {tail[0]}")
    ttft, rss = out.stdout.strip().splitlines()[-1].split()
    return float(ttft), float(rss)


def bench_gguf(
    model: str,
    *,
    prompt_len: int = 128,
    n_decode: int = 64,
    threads: int = 2,
    vs: str | None = "llama.cpp",
    rounds: int = 3,
    memory: bool = True,
    profile: bool = True,
) -> GGUFBenchResult:
    """Run both engines `rounds` times, interleaved; see the module docstring."""
    if vs not in (None, "llama.cpp", "llama_cpp"):
        raise OnnxExecError(f"unknown anchor '{vs}' for a GGUF model; use llama.cpp or none")
    n_ctx = prompt_len + n_decode + 8
    t = time.perf_counter()
    ours = _Ours(model, n_ctx, threads)
    runs = [EngineRun("onnxexec", load_s=time.perf_counter() - t)]
    anchor = _LlamaCpp(model, n_ctx, threads) if vs else None
    if anchor is not None:
        runs.append(EngineRun("llama.cpp", load_s=anchor.load_s))
    try:
        ids = prompt_ids(ours.llm.tokenizer, prompt_len)
        # warm-up: first-call allocations, page faults of the weights
        _ours_round(ours, ids, 2)
        if anchor is not None:
            anchor.round(ids, 2)
        for _ in range(rounds):  # interleaved, so machine noise hits both engines
            _record(runs[0], len(ids), n_decode, _ours_round(ours, ids, n_decode))
            if anchor is not None:
                _record(runs[1], len(ids), n_decode, anchor.round(ids, n_decode))
    finally:
        if anchor is not None:
            anchor.close()
    c = ours.llm.config
    res = GGUFBenchResult(
        model,
        threads,
        prompt_len,
        n_decode,
        runs,
        file_mb=os.path.getsize(model) / 2**20,
        kv_cache_mb=2 * c.n_layer * n_ctx * c.n_head_kv * c.head_dim * 4 / 2**20,
    )
    if vs:
        a, b = runs[0].greedy_ids, runs[1].greedy_ids
        res.greedy_equal = sum(x == y for x, y in zip(a, b, strict=False))
        res.greedy_prefix = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
    if profile:
        ours.llm.reset()
        ours.llm.eval(ids)
        res.profile, res.step_wall_ms, res.step_ops_ms = profile_decode_step(
            ours.llm, runs[0].greedy_ids[0]
        )
    del ours
    if memory:
        for r in runs:
            r.process_ttft_s, r.peak_rss_mb = child_run(
                r.name, model, threads, n_ctx, ids, n_decode
            )
    return res


def format_result(r: GGUFBenchResult) -> list[str]:
    lines = [
        f"{os.path.basename(r.model)}: {r.threads} threads, {r.prompt_len}-token prompt, "
        f"{r.n_decode} greedy tokens (medians of rounds)",
        f"{'engine':<11}{'load s':>8}{'prefill tok/s':>15}{'decode tok/s':>14}"
        f"{'TTFT ms':>9}{'process TTFT s':>16}{'peak RSS MB':>13}",
    ]
    for e in r.engines:
        lines.append(
            f"{e.name:<11}{e.load_s:>8.2f}{e.med('prefill_tok_s'):>15.1f}"
            f"{e.med('decode_tok_s'):>14.1f}{e.med('ttft_ms'):>9.0f}"
            f"{e.process_ttft_s:>16.2f}{e.peak_rss_mb:>13.0f}"
        )
    if len(r.engines) == 2:
        lines.append(
            f"ratio onnxexec/llama.cpp: prefill {r.ratio('prefill_tok_s'):.2f}x  "
            f"decode {r.ratio('decode_tok_s'):.2f}x"
        )
        lines.append(
            f"greedy ids: {r.greedy_equal}/{r.n_decode} equal, first {r.greedy_prefix} identical"
        )
    lines.append(
        f"memory budget (file + KV cache + 200 MB): {r.file_mb + r.kv_cache_mb + 200:.0f} MB"
    )
    if r.profile:
        over = r.step_wall_ms - r.step_ops_ms
        lines.append(
            f"one decode step: {r.step_wall_ms:.2f} ms wall = {r.step_ops_ms:.2f} ms "
            f"in ops + {over:.2f} ms executor overhead"
        )
        lines.append(f"  {'op type':<26}{'ms':>9}{'calls':>7}{'share':>8}")
        for op, ms, calls, share in r.profile:
            lines.append(f"  {op:<26}{ms:>9.3f}{calls:>7}{share * 100:>7.1f}%")
    return lines


def to_json(r: GGUFBenchResult) -> str:
    d = asdict(r)
    for e, src in zip(d["engines"], r.engines, strict=True):
        for key in ("prefill_tok_s", "decode_tok_s", "ttft_ms"):
            e[f"{key}_median"] = src.med(key)
    if len(r.engines) == 2:
        d["ratio"] = {"prefill": r.ratio("prefill_tok_s"), "decode": r.ratio("decode_tok_s")}
    return json.dumps(d)
