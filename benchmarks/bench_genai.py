"""Decode tok/s of `onnxexec` (GenaiModel) vs onnxruntime-genai on a genai folder.

    python benchmarks/bench_genai.py MODEL_DIR [--threads 2] [--tokens 64] [--rounds 3]
        [--profile]

Greedy, same prompt; rounds alternate between the two (interleaved) so machine load
affects both alike. Prints per-round tok/s and the median ratio onnxexec / genai.
--profile instead decodes once with the session's profiler on and prints, per op type,
the microseconds per decode token and the time outside the nodes (the executor, the
Python of GenaiModel's step).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import tempfile
import time

import onnxruntime_genai as og

from onnxexec.llm.genai import GenaiModel, GenaiResult

PROMPT = "The quick brown fox jumps over the lazy dog"


def _genai_decode(model: og.Model, ids: list[int], n: int, seq: list | None = None) -> float:
    """Decode tok/s after the prefill; the new tokens go to `seq` when given."""
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + n)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)  # prefill; the first token comes with it
    gen.generate_next_token()
    t = time.perf_counter()
    k = 0
    while not gen.is_done():
        gen.generate_next_token()
        k += 1
    rate = k / (time.perf_counter() - t)
    if seq is not None:
        seq[:] = list(gen.get_sequence(0))[len(ids) :]
    return rate


def _profile(model_dir: str, threads: int, n: int) -> None:
    prefix = tempfile.mkdtemp() + "/genai"
    ours = GenaiModel(model_dir, threads=threads, profile_prefix=prefix)
    ours.generate(PROMPT, 4)  # warm-up: numba compilation
    res = GenaiResult()
    for _ in ours.stream_ids(ours.encode(PROMPT), n, res):
        pass
    with open(ours.session.end_profiling()) as f:
        events = json.load(f)
    runs = [e for e in events if e["cat"] == "Session" and e["name"] == "model_run"]
    steps = runs[-(len(res.tokens) - 1) :]  # the decode steps of the measured run
    t0, t1 = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    calls: dict[str, list[int]] = collections.defaultdict(list)
    for e in events:
        if e["cat"] == "Node" and t0 <= e["ts"] <= t1:
            calls[e["args"]["op_name"]].append(e["dur"])
    total = sum(e["dur"] for e in steps)
    n = len(steps)
    print(f"{res.decode_tok_s:.1f} tok/s with profiling; {total / n:.0f} us/token")
    print("  op (calls/token): mean us/token, share; median us/call (less load noise)")
    for name, ds in sorted(calls.items(), key=lambda kv: -sum(kv[1])):
        us, share, med = sum(ds) / n, 100 * sum(ds) / total, statistics.median(ds)
        print(f"  {name:34s} ({len(ds) / n:3.0f}) {us:8.0f} {share:5.1f}%  {med:6.0f}")
    rest = total - sum(sum(ds) for ds in calls.values())
    print(
        f"  {'(outside nodes, profiler included)':40s} {rest / n:8.0f} {100 * rest / total:5.1f}%"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="per-op time of onnxexec's decode")
    a = ap.parse_args()
    if a.profile:
        _profile(a.model_dir, a.threads, a.tokens)
        return
    cfg = og.Config(a.model_dir)
    cfg.clear_providers()
    opts = {"intra_op_num_threads": a.threads}
    cfg.overlay(json.dumps({"model": {"decoder": {"session_options": opts}}}))
    ref = og.Model(cfg)
    ours = GenaiModel(a.model_dir, threads=a.threads)
    ids = ours.encode(PROMPT)
    ours.generate(PROMPT, 4)  # warm-up: numba compilation, first-run allocations
    _genai_decode(ref, ids, 4)
    ratios = []
    for r in range(a.rounds):
        res = GenaiResult()
        for _ in ours.stream_ids(ids, a.tokens, res):
            pass
        want: list[int] = []
        g = _genai_decode(ref, ids, a.tokens, want)
        ratios.append(res.decode_tok_s / g)
        same = "same tokens" if res.tokens == want else "TOKENS DIFFER"
        print(f"round {r}: onnxexec {res.decode_tok_s:.1f} tok/s  genai {g:.1f} tok/s  {same}")
    print(f"decode ratio onnxexec/genai (median): {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
