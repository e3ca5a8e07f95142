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


def _genai_decode(model: og.Model, ids: list[int], n: int) -> float:
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
    return k / (time.perf_counter() - t)


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
    per_op: collections.Counter[str] = collections.Counter()
    for e in events:
        if e["cat"] == "Node" and t0 <= e["ts"] <= t1:
            per_op[e["args"]["op_name"]] += e["dur"]
    total = sum(e["dur"] for e in steps)
    print(f"{res.decode_tok_s:.1f} tok/s with profiling; {total / len(steps):.0f} us/token")
    for name, us in [*per_op.most_common(), ("(outside nodes)", total - sum(per_op.values()))]:
        print(f"  {name:34s} {us / len(steps):8.0f} us/token  {100 * us / total:5.1f}%")


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
        g = _genai_decode(ref, ids, a.tokens)
        ratios.append(res.decode_tok_s / g)
        print(f"round {r}: onnxexec {res.decode_tok_s:.1f} tok/s  genai {g:.1f} tok/s")
    print(f"decode ratio onnxexec/genai (median): {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
