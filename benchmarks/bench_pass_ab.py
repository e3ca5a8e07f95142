"""One model with and without one optimizer pass, and onnxruntime, interleaved.

    python benchmarks/bench_pass_ab.py MODEL.onnx [--without fuse_qlut] [--runs 15]

Two onnxexec sessions in one process (the second created with the named pass left out
of passes/fusions.py's EXTENDED list), one onnxruntime session (2 threads); prints the
max output differences, median / min latencies and their ratios. The input is random
float32 of the model's first input shape (dynamic dims as 1).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from onnxexec.passes import fusions
from onnxexec.runtime.session import InferenceSession


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--without", default="fuse_qlut")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    import onnxruntime as ort

    new = InferenceSession(args.model)
    saved = list(fusions.EXTENDED)
    fusions.EXTENDED[:] = [f for f in saved if f.__name__ != args.without]
    try:
        old = InferenceSession(args.model)
    finally:
        fusions.EXTENDED[:] = saved
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    ref = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    i = ref.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    feeds = {i.name: np.random.default_rng(0).random(shape).astype(np.float32)}
    ya, yb, yr = (s.run(None, feeds)[0] for s in (new, old, ref))
    d_old, d_ort = np.abs(ya - yb).max(), np.abs(ya - yr).max()
    print(f"max |with - without| {d_old:.3g}  max |with - ort| {d_ort:.3g}")
    t: dict[str, list[float]] = {"with": [], "without": [], "ort": []}
    for _ in range(args.runs):
        for k, s in (("with", new), ("without", old), ("ort", ref)):
            t0 = time.perf_counter()
            s.run(None, feeds)
            t[k].append(time.perf_counter() - t0)
    for k, v in t.items():
        print(f"{k}: median {np.median(v) * 1e3:.1f} ms  min {np.min(v) * 1e3:.1f} ms")
    m = {k: float(np.median(v)) for k, v in t.items()}
    a, b, c = m["with"] / m["ort"], m["without"] / m["ort"], m["with"] / m["without"]
    print(f"median ratio with/ort {a:.2f}  without/ort {b:.2f}  with/without {c:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
