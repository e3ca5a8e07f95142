"""Per-call latency of small-batch calls (scikit-learn models), onnxexec vs onnxruntime.

    python benchmarks/bench_ml_rows.py [DIR] [--rows 1] [--runs 300] [--threads 2]
        [--models rf_classifier gb_regressor ...]

DIR holds models/sklearn_models.py's output (built there when missing; default
benchmarks/.models/sklearn). Each model's sidecar rows are cut / repeated to --rows;
both sessions run back to back --runs times with no pause (bench_onnx.py sleeps
before each run so the other engine's spinning threads are quiet, which adds wake-up
time to every call: at one row that hides the few microseconds this measures). Prints
the median microseconds per call of each engine and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", type=Path, nargs="?", default=ROOT / "benchmarks" / ".models" / "sklearn")
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--models", nargs="+", default=None)
    args = p.parse_args(argv)
    import onnxruntime as ort

    import onnxexec

    if not (args.dir / "manifest.json").exists():
        script = ROOT / "models" / "sklearn_models.py"
        subprocess.run([sys.executable, str(script), str(args.dir)], check=True)
    ort.set_default_logger_severity(3)  # its shape warnings for ZipMap-less outputs
    paths = sorted(args.dir.glob("*.onnx"))
    if args.models:
        paths = [q for q in paths if q.stem in args.models]
    print(f"{'model':<24}{'rows':>6}{'ours us':>10}{'ort us':>10}{'ratio':>8}")
    for path in paths:
        with np.load(path.with_name(path.stem + ".inputs.npz")) as z:
            feed = {k: np.resize(z[k], (args.rows, *z[k].shape[1:])) for k in z.files}
        opts = onnxexec.SessionOptions(intra_op_num_threads=args.threads)
        ours = onnxexec.InferenceSession(str(path), opts)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        times: tuple[list[float], list[float]] = ([], [])
        for i in range(args.runs + 20):  # the first 20 warm both up
            for k, s in enumerate((ours, ref)):
                t = time.perf_counter()
                s.run(None, feed)
                if i >= 20:
                    times[k].append(time.perf_counter() - t)
        a, b = (statistics.median(t) * 1e6 for t in times)
        print(f"{path.stem:<24}{args.rows:>6}{a:>10.1f}{b:>10.1f}{a / b:>8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
