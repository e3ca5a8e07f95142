"""Subprocess workers for fuzz cases: a crash kills only its worker, a hang is a timeout.

Parent and worker talk over pipes: an 8-byte length, then a pickle. A worker runs
cases one at a time (`python -m tests.fuzz.pool`); it has faulthandler on (its stderr
goes to a log whose tail the parent reports), and an address-space limit so that a
runaway allocation ends in MemoryError instead of swapping the machine. The parent
replaces a worker that died (crash: the signal or exit code) or overran the case
timeout (hang: killed).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 6 << 30  # bytes of address space a worker may map
WARMUP_TIMEOUT = 900.0  # seconds for a worker's warm-up plus its first case
_LEN = struct.Struct("<Q")


@dataclass
class Result:
    index: int
    target: str
    outcome: str  # ok | clean | raw | crash | hang
    detail: str
    seconds: float


def _send(f: Any, obj: Any) -> None:
    raw = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_LEN.pack(len(raw)) + raw)
    f.flush()


def _recv(f: Any) -> Any:
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        raise EOFError
    (n,) = _LEN.unpack(head)
    raw = f.read(n)
    if len(raw) < n:
        raise EOFError
    return pickle.loads(raw)


class Worker:
    def __init__(self, log_dir: Path, n: int) -> None:
        self.log_path = log_dir / f"worker{n}-{time.monotonic_ns()}.log"
        self.log = self.log_path.open("wb")
        env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
        env.setdefault("ONNXEXEC_FUZZ_MEMORY", str(MEMORY_LIMIT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.pool"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=ROOT,
            env=env,
        )
        self.case: tuple[int, str] | None = None
        self.deadline = 0.0
        self.started = 0.0
        self.warm = False  # the first case waits for the warm-up
        self.history: list[str] = []  # cases run so far: a crash may be an earlier one's

    def submit(self, index: int, target: str, payload: Any, timeout: float) -> None:
        self.case = (index, target)
        self.history = [*self.history[-15:], f"{target} {index}"]
        self.started = time.monotonic()
        # the first answer comes after the worker's warm-up (imports, kernel compiles)
        self.deadline = self.started + (timeout if self.warm else max(timeout, WARMUP_TIMEOUT))
        assert self.proc.stdin is not None
        _send(self.proc.stdin, (target, payload))

    def collect(self) -> Result:
        assert self.case is not None and self.proc.stdout is not None
        index, target = self.case
        self.case = None
        try:
            outcome, detail = _recv(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError):
            code = self.proc.wait()
            sig = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            ran = ", ".join(self.history)
            detail = f"{sig}; this worker ran: {ran}; {self.tail()}"
            return Result(index, target, "crash", detail, self.elapsed())
        self.warm = True
        return Result(index, target, outcome, detail, self.elapsed())

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tail(self) -> str:
        self.log.flush()
        text = self.log_path.read_bytes()[-1500:].decode("utf-8", "replace")
        return " | ".join(line for line in text.splitlines() if line.strip())[-1200:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def run_cases(
    cases: Iterable[tuple[int, str, Any]], jobs: int, timeout: float, log_dir: Path
) -> Iterator[Result]:
    """Run (index, target, payload) cases on `jobs` workers; yields results as they end."""
    it = iter(cases)
    workers = [Worker(log_dir, n) for n in range(jobs)]
    pending = True
    try:
        while True:
            for w in workers:
                if w.case is None and pending:
                    case = next(it, None)
                    if case is None:
                        pending = False
                        break
                    w.submit(case[0], case[1], case[2], timeout)
            busy = [w for w in workers if w.case is not None]
            if not busy:
                return
            now = time.monotonic()
            wait = max(0.0, min(w.deadline for w in busy) - now)
            ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], wait)
            for i, w in enumerate(workers):
                if w.case is None:
                    continue
                if w.proc.stdout in ready:
                    r = w.collect()
                    if r.outcome == "crash":
                        w.kill()
                        workers[i] = Worker(log_dir, i)
                    yield r
                elif time.monotonic() > w.deadline:
                    index, target = w.case
                    took = w.elapsed()
                    w.kill()
                    workers[i] = Worker(log_dir, i)
                    yield Result(index, target, "hang", f"no answer after {took:.0f} s", took)
    finally:
        for w in workers:
            if w.case is None and w.proc.poll() is None and w.proc.stdin is not None:
                w.proc.stdin.close()  # EOF: the worker exits
        for w in workers:
            w.kill()


def warmup(work: str) -> None:
    from tests.fuzz.seeds import gguf_seeds, onnx_seeds, tokenizer_seeds
    from tests.fuzz.targets import classify

    for target, seeds in (("gguf", gguf_seeds()), ("onnx", onnx_seeds())):
        for data in seeds:
            classify(target, data, work)
    for md in tokenizer_seeds():
        classify("tokenizer", (md, ["warm up"], [0]), work)


def _worker_main() -> None:
    import faulthandler
    import resource

    faulthandler.enable()
    limit = int(os.environ.get("ONNXEXEC_FUZZ_MEMORY", MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from tests.fuzz.targets import classify

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    with tempfile.TemporaryDirectory(prefix="onnxexec-fuzz-") as work:
        # every seed once, unmutated, before the first case: numba compiles (minutes
        # on a cold cache and a busy machine) must not count against a case's timeout
        warmup(work)
        while True:
            try:
                target, payload = _recv(stdin)
            except EOFError:
                return
            _send(stdout, classify(target, payload, work))


if __name__ == "__main__":
    _worker_main()
