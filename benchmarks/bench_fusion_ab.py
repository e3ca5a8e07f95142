"""In-process A/B of one optimizer pass: the same model with and without it (issue 26),
optionally next to onnxruntime.

    PYTHONPATH=$PWD python benchmarks/bench_fusion_ab.py MODEL.onnx --without fuse_attention
        [--inputs FEEDS.npz] [--threads 1] [--runs 200] [--vs-onnxruntime]

Two onnxexec sessions in one process (the second created with the named pass left out of
passes/fusions.py's lists), run interleaved; prints the node counts, the largest output
difference between them (and to onnxruntime), and the median process CPU time and wall
time per run of each. CPU time is the steady figure on a shared machine (it does not count
time spent waiting for a core). Feeds default to MODEL.inputs.npz beside the model (what
models/build_*.py write), else random float32 / zero integer inputs of the declared
shapes (symbolic dims as 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def _feeds(sess: Any, path: Path | None, model: Path) -> dict[str, np.ndarray]:
    path = path or model.with_name(model.stem + ".inputs.npz")
    if path.exists():
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.random(shape).astype(np.float32)
        else:
            feeds[i.name] = np.zeros(shape, dtype=np.int64)
    return feeds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", type=Path)
    p.add_argument("--without", required=True, help="name of a pass in passes/fusions.py")
    p.add_argument("--inputs", type=Path)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--vs-onnxruntime", action="store_true", help="also time onnxruntime")
    args = p.parse_args(argv)

    import onnxexec
    from onnxexec.passes import fusions

    opts = onnxexec.SessionOptions(intra_op_num_threads=args.threads)
    with_pass = onnxexec.InferenceSession(str(args.model), opts)
    lists = [lst for lst in vars(fusions).values() if isinstance(lst, list)]
    found = [(lst, f) for lst in lists for f in lst if getattr(f, "__name__", "") == args.without]
    if not found:
        p.error(f"no pass named {args.without!r} in passes/fusions.py")
    saved = [(lst, list(lst)) for lst, _ in found]
    for lst, f in found:
        lst.remove(f)
    try:
        without = onnxexec.InferenceSession(str(args.model), opts)
    finally:
        for lst, old in saved:
            lst[:] = old
    sessions: dict[str, Any] = {"with": with_pass, "without": without}
    if args.vs_onnxruntime:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.log_severity_level = 3
        sessions["onnxruntime"] = ort.InferenceSession(
            str(args.model), so, providers=["CPUExecutionProvider"]
        )
    for label in ("with", "without"):
        ops = [n.op_type for n in sessions[label].optimized_graph.nodes]
        print(f"{label} {args.without}: {len(ops)} nodes")
    feeds = _feeds(with_pass, args.inputs, args.model)
    first = {k: s.run(None, feeds)[0] for k, s in sessions.items()}
    for k in sessions:
        if k != "with":
            print(f"max |with - {k}| {np.abs(first['with'] - first[k]).max():.3g}")
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sessions}
    for _ in range(2):
        for s in sessions.values():
            s.run(None, feeds)
    for _ in range(args.runs):
        for label, s in sessions.items():
            c, w = time.process_time(), time.perf_counter()
            s.run(None, feeds)
            times[label].append((time.process_time() - c, time.perf_counter() - w))
    med = {k: np.median(np.array(v) * 1e3, axis=0) for k, v in times.items()}
    for label, (cpu, wall) in med.items():
        print(f"{label:<11} cpu {cpu:8.3f} ms  wall {wall:8.3f} ms (median of {args.runs})")
    print(f"with / without: cpu {med['with'][0] / med['without'][0]:.3f}")
    if args.vs_onnxruntime:
        ort_wall = med["onnxruntime"][1]
        print(
            f"wall ratio to onnxruntime: with {med['with'][1] / ort_wall:.2f}"
            f"  without {med['without'][1] / ort_wall:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
