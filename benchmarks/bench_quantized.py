"""onnxexec vs onnxruntime on onnxruntime-quantized models (issue 23).

    python benchmarks/bench_quantized.py [--model-dir DIR] [--size full|tiny]
        [--variants bert.dynamic mobilenetv2.static_qdq lstm.dynamic ...] [--runs N]
        [--threads 2] [--level 99]

Builds missing variants with models/build_ort_quantized.py (random weights), then per
variant creates both sessions (2 threads), runs them interleaved
(onnxexec.benchmark.onnx_bench) and prints median latencies and the latency ratio
onnxexec / onnxruntime, with the max abs output difference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from onnxexec.benchmark.onnx_bench import bench_onnx, format_result

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("bert.dynamic", "mobilenetv2.static_qdq", "resnet.static_qdq_contrib", "lstm.dynamic")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, default=ROOT / "build" / "ort_quantized")
    ap.add_argument("--size", choices=("tiny", "full"), default="full")
    ap.add_argument("--variants", nargs="*", default=list(DEFAULT))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--level", type=int, default=99)
    args = ap.parse_args(argv)
    build = [sys.executable, str(ROOT / "models" / "build_ort_quantized.py"), str(args.model_dir)]
    build += ["--size", args.size, "--only", *args.variants]
    subprocess.run(build, check=True, capture_output=True)
    manifest = json.loads((args.model_dir / "manifest.json").read_text())
    ratios = {}
    for name in args.variants:
        entry = manifest[name]
        with np.load(args.model_dir / entry["feeds"]) as z:
            feeds = {k: z[k][:1] for k in z.files}  # batch 1
        r = bench_onnx(
            str(args.model_dir / entry["file"]), feeds, threads=args.threads, runs=args.runs,
            memory=False, level=args.level,
        )  # fmt: skip
        print(f"== {name} ({args.size}, batch 1, {args.threads} threads)")
        print("\n".join(format_result(r)))
        ratios[name] = r.ratio()
    print("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
