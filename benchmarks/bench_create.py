"""Session creation time against graph size: onnxexec vs onnxruntime, same run.

    python benchmarks/bench_create.py [--sizes 1000,5000,20000] [--rounds 3]
        [--ops MatMul,Add,Relu,...] [--level 99]

Each row is one chain (models/build_chain.py: n ops one after another on a 4x4
float32) serialized once; both engines create a session from the same bytes at the
same optimization level, rounds interleaved, median reported. Creation should grow
linearly with n (the per-1k-node column stays flat).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ort_session(model: bytes, level: int) -> object:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {
        0: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        1: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        2: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    }.get(level, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _ox_session(model: bytes, level: int) -> object:
    import onnxexec

    so = onnxexec.SessionOptions()
    so.graph_optimization_level = level
    return onnxexec.InferenceSession(model, so)


def _timed(make: object, model: bytes, level: int) -> float:
    t = time.perf_counter()
    make(model, level)  # type: ignore[operator]
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", default=None, help="comma-separated op cycle")
    ap.add_argument("--level", type=int, default=99)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "models"))
    from build_chain import DEFAULT_OPS, chain_model

    ops = args.ops.split(",") if args.ops else list(DEFAULT_OPS)
    # warm-up: imports and the kernels a model pulls in are paid once per process
    small = chain_model(len(ops), ops).SerializeToString()
    _ox_session(small, args.level)
    _ort_session(small, args.level)
    print(f"ops cycle {','.join(ops)}, level {args.level}, median of {args.rounds}")
    print(f"{'nodes':>7} {'onnxexec s':>11} {'ort s':>8} {'ratio':>6} {'onnxexec s/1k':>14}")
    for n in (int(s) for s in args.sizes.split(",")):
        model = chain_model(n, ops).SerializeToString()
        ox, ort_t = [], []
        for _ in range(args.rounds):
            ox.append(_timed(_ox_session, model, args.level))
            ort_t.append(_timed(_ort_session, model, args.level))
        a, b = statistics.median(ox), statistics.median(ort_t)
        print(f"{n:>7} {a:>11.3f} {b:>8.3f} {a / b:>6.2f} {1000 * a / n:>14.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
