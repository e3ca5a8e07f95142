"""onnxexec vs onnxruntime on a model onnxruntime's transformer optimizer made.

    python benchmarks/bench_ort_optimized.py [--model bert] [--size full|tiny]
        [--model-dir DIR] [--runs N] [--threads 2] [--batch 1]

Builds the model with models/build_ort_optimized.py when missing (BERT-base shapes,
random weights, com.microsoft EmbedLayerNormalization / Attention /
SkipLayerNormalization / BiasGelu), then runs both sessions interleaved
(onnxexec.benchmark.onnx_bench) and prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="bert", choices=("bert", "gpt2", "vit"))
    p.add_argument("--size", default="full", choices=("full", "tiny"))
    p.add_argument("--model-dir", type=Path, default=ROOT / "benchmarks" / ".models" / "ortopt")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args(argv)
    out = args.model_dir / args.size
    model = out / f"{args.model}_ortopt_default.onnx"
    if not model.exists():
        build = [sys.executable, str(ROOT / "models" / "build_ort_optimized.py"), str(out)]
        subprocess.run([*build, "--size", args.size, "--only", args.model], check=True)
    from onnxexec.benchmark.onnx_bench import bench_onnx, format_result

    with np.load(model.with_name(model.stem + ".inputs.npz")) as z:
        feed = {k: z[k][: args.batch] for k in z.files}
    r = bench_onnx(str(model), feed, threads=args.threads, runs=args.runs, memory=False)
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in feed.items())
    sys.stdout.write(f"{model.name} ({shapes}), {args.threads} threads\n")
    sys.stdout.write("\n".join(format_result(r)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
