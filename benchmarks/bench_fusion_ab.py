"""In-process A/B of one fusion pass: the same model with and without it (issue 26).

    PYTHONPATH=$PWD python benchmarks/bench_fusion_ab.py MODEL.onnx --without fuse_attention
        [--inputs FEEDS.npz] [--threads 1] [--runs 200]

Two sessions in one process, run interleaved; prints the median process CPU time and
wall time per run of each, and the node counts of the fused op. CPU time is the steady
figure on a shared machine (it does not count time spent waiting for a core). Feeds
default to MODEL.inputs.npz beside the model (what models/build_*.py write).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", type=Path)
    p.add_argument("--without", required=True, help="name of a pass in passes/fusions.py")
    p.add_argument("--inputs", type=Path)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=200)
    args = p.parse_args(argv)

    import onnxexec
    from onnxexec.passes import fusions

    feeds_path = args.inputs or args.model.with_name(args.model.stem + ".inputs.npz")
    with np.load(feeds_path) as z:
        feeds = {k: z[k] for k in z.files}
    opts = onnxexec.SessionOptions(intra_op_num_threads=args.threads)
    with_pass = onnxexec.InferenceSession(str(args.model), opts)
    passes = [f for f in fusions.EXTENDED + fusions.LAYOUT if f.__name__ == args.without]
    if not passes:
        p.error(f"no pass named {args.without!r} in passes/fusions.py")
    for lst in (fusions.EXTENDED, fusions.LAYOUT):
        if passes[0] in lst:
            lst.remove(passes[0])
    without = onnxexec.InferenceSession(str(args.model), opts)
    sessions = {"with": with_pass, "without": without}
    for label, s in sessions.items():
        ops = [n.op_type for n in s.optimized_graph.nodes]
        print(f"{label} {args.without}: {len(ops)} nodes")
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sessions}
    for _ in range(3):
        for s in sessions.values():
            s.run(None, feeds)
    for _ in range(args.runs):
        for label, s in sessions.items():
            c, w = time.process_time(), time.perf_counter()
            s.run(None, feeds)
            times[label].append((time.process_time() - c, time.perf_counter() - w))
    med = {k: np.median(np.array(v) * 1e3, axis=0) for k, v in times.items()}
    for label, (cpu, wall) in med.items():
        print(f"{label:<8} cpu {cpu:8.3f} ms  wall {wall:8.3f} ms (median of {args.runs})")
    print(f"with / without: cpu {med['with'][0] / med['without'][0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
