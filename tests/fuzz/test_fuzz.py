"""Fuzzing in CI (issue 20): mutated ONNX models, GGUF files and tokenizer metadata
must end in success or an OnnxExecError (documented ValueErrors where the target
passes a bad argument on purpose), never a crash, a hang or a raw exception.

The default counts keep this under ~2 minutes on 2 cores; ONNXEXEC_FUZZ_CASES=N runs
N inputs per target (ONNXEXEC_FUZZ_SEED, ONNXEXEC_FUZZ_JOBS: seed, workers). A
failure names each case; `python -m tests.fuzz.run --target T --seed S --only-case I`
rebuilds and reruns it.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.fuzz.pool import run_cases
from tests.fuzz.run import TARGETS, fuzz

DEFAULT_CASES = {"onnx": 800, "gguf": 500, "tokenizer": 1200}


def test_harness_sees_every_outcome(tmp_path: Path) -> None:
    cases = [
        (i, "selftest", w) for i, w in enumerate(["ok", "clean", "raw", "crash", "memory", "ok"])
    ]
    cases.append((6, "selftest", "hang"))
    got = {r.index: r for r in run_cases(cases, jobs=2, timeout=2.0, log_dir=tmp_path)}
    assert [got[i].outcome for i in range(7)] == [
        "ok",
        "clean",
        "raw",
        "crash",
        "raw",
        "ok",
        "hang",
    ]
    assert got[2].detail.startswith("KeyError at ")
    assert "signal SIGSEGV" in got[3].detail and "Fatal Python error" in got[3].detail
    assert got[4].detail.startswith("MemoryError")


def test_fuzz_loaders_and_tokenizers(tmp_path: Path) -> None:
    n = int(os.environ.get("ONNXEXEC_FUZZ_CASES", "0"))
    cases = dict.fromkeys(TARGETS, n) if n > 0 else DEFAULT_CASES
    seed = int(os.environ.get("ONNXEXEC_FUZZ_SEED", "0"))
    jobs = int(os.environ.get("ONNXEXEC_FUZZ_JOBS", "2"))
    s = fuzz(TARGETS, cases, seed=seed, jobs=jobs, out=tmp_path / "failures")
    for t in TARGETS:
        assert sum(s.counts[t].values()) == cases[t], s.table()
    report = "\n".join(
        f"{r.target} case {r.index} (seed {seed}): {r.outcome}: {r.detail}" for r in s.failures
    )
    assert not s.failures, f"\n{s.table()}\n{report}"
