"""Seeded fuzz runs over the ONNX loader, the GGUF reader + LLM and the tokenizers.

    PYTHONPATH=. python -m tests.fuzz.run --cases 20000 --jobs 2 --seed 1 [--target gguf]

Case i of a target is a function of (seed, target, i) alone, so any reported case is
rebuilt with `--only-case i`. Failing inputs are written to --out (a pickle of the
payload per case) with the summary. Exit status 1 if any case crashed, hung or ended
in a raw exception.
"""

from __future__ import annotations

import argparse
import collections
import json
import pickle
import random
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz import mutate
from tests.fuzz.pool import Result, run_cases
from tests.fuzz.seeds import gguf_seeds, onnx_seeds, tokenizer_seeds

TARGETS = ("onnx", "gguf", "tokenizer")
TIMEOUT = {"onnx": 60.0, "gguf": 90.0, "tokenizer": 30.0}
BAD = ("raw", "crash", "hang")


def make_case(target: str, seed: int, i: int) -> Any:
    rng = random.Random(f"{seed}:{target}:{i}")
    if target == "onnx":
        data = rng.choice(onnx_seeds())
        if rng.random() < 0.6:
            try:
                return mutate.mutate_onnx_struct(rng, data)
            except ValueError:  # protobuf refused the edit (a closed enum): edit bytes
                pass
        return mutate.mutate_bytes(rng, data)
    if target == "gguf":
        data = rng.choice(gguf_seeds())
        r = rng.random()
        if r < 0.55:
            try:
                return mutate.mutate_gguf_struct(rng, data)
            except (struct.error, TypeError, ValueError, OverflowError):
                pass  # a value the codec cannot pack: edit bytes instead
        # byte edits mostly in the header: the tensor data are numbers, any value goes
        hot = _header_len(data) if r < 0.95 else None
        return mutate.mutate_bytes(rng, data, hot)
    md = rng.choice(tokenizer_seeds())
    if rng.random() < 0.7:
        md = mutate.mutate_metadata(rng, md)
    toks = md.get("tokenizer.ggml.tokens")
    toks = toks if isinstance(toks, list) and toks else [""]
    specials = [t for t in toks[:4] + toks[-2:] if isinstance(t, str)]
    texts = [mutate.random_text(rng, specials) for _ in range(3)]
    n = len(toks)
    ids = [rng.randrange(-3, n + 3) for _ in range(rng.randint(0, 40))]
    return md, texts, ids


def _header_len(data: bytes) -> int:
    from tests.fuzz.gguf_codec import decode, encode

    g = decode(data)
    return len(encode(g)) - len(g.data)


@dataclass
class Summary:
    counts: dict[str, collections.Counter] = field(default_factory=dict)
    failures: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    def table(self) -> str:
        rows = [f"{'target':<10} {'inputs':>7} " + " ".join(f"{k:>6}" for k in OUTCOMES)]
        total: collections.Counter = collections.Counter()
        for t, c in self.counts.items():
            total.update(c)
            rows.append(f"{t:<10} {sum(c.values()):>7} " + " ".join(f"{c[k]:>6}" for k in OUTCOMES))
        rows.append(
            f"{'total':<10} {sum(total.values()):>7} "
            + " ".join(f"{total[k]:>6}" for k in OUTCOMES)
        )
        return "\n".join(rows)


OUTCOMES = ("ok", "clean", "raw", "crash", "hang")


def fuzz(
    targets: tuple[str, ...],
    cases: int | dict[str, int],
    seed: int = 0,
    jobs: int = 2,
    out: Path | None = None,
    only: int | None = None,
) -> Summary:
    """Run `cases` inputs per target; failures (with their payloads) go to `out`."""
    per = cases if isinstance(cases, dict) else dict.fromkeys(targets, cases)
    s = Summary(counts={t: collections.Counter() for t in targets})
    payloads: dict[tuple[str, int], Any] = {}

    def gen() -> Iterator[tuple[int, str, Any]]:
        # interleaved, so slow targets share the workers with fast ones
        n = max(per[t] for t in targets)
        for i in range(n) if only is None else [only]:
            for t in targets:
                if only is not None or i < per[t]:
                    p = make_case(t, seed, i)
                    payloads[(t, i)] = p
                    yield i, t, p

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="onnxexec-fuzz-logs-") as logs:
        for r in run_cases(gen(), jobs, max(TIMEOUT.values()), Path(logs)):
            p = payloads.pop((r.target, r.index))
            s.counts[r.target][r.outcome] += 1
            if r.outcome in BAD:
                s.failures.append(r)
                if out is not None:
                    out.mkdir(parents=True, exist_ok=True)
                    (out / f"{r.target}-{r.index}.pkl").write_bytes(pickle.dumps(p))
    s.seconds = time.monotonic() - t0
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", choices=TARGETS)
    ap.add_argument("--cases", type=int, default=1000, help="inputs per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    ap.add_argument("--only-case", type=int, default=None)
    a = ap.parse_args(argv)
    targets = tuple(a.target or TARGETS)
    s = fuzz(targets, a.cases, a.seed, a.jobs, a.out, a.only_case)
    print(s.table())
    print(f"{s.seconds:.0f} s, seed {a.seed}, {a.jobs} workers")
    kinds = collections.Counter(f"{r.target} {r.outcome}: {r.detail[:160]}" for r in s.failures)
    for k, n in kinds.most_common():
        print(f"{n:6d} x {k}")
    if s.failures and a.out:
        (a.out / "summary.json").write_text(
            json.dumps([r.__dict__ for r in s.failures], indent=1, default=str)
        )
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
