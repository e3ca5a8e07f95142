"""qmatmul speed: GFLOP/s and GB/s per type at SmolLM2-135M shapes, T=1 and T=128.

    python benchmarks/bench_qmatmul.py                       # all fast types, 2 threads
    python benchmarks/bench_qmatmul.py --types Q4_1,Q8_0 --threads 1
    python benchmarks/bench_qmatmul.py --model path/to/model.gguf   # one decode step

GB/s counts the weight's GGUF bytes read once per call. K-quant types need K % 256 == 0,
so for them K = 576 is replaced by 768. --model times the matmuls of one decode step
(every 2-D weight once at T=1, token_embd as the tied output when there is no
output.weight): the ceiling in tokens/s that the matmuls alone allow. For reference,
llama.cpp decodes SmolLM2-135M Q4_1 at ~115 tokens/s on 2 threads of this machine.
"""

from __future__ import annotations

import argparse
import os
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.qmatmul import BLAS_MIN_T, FAST_TYPES, prepare_weight, qmatmul
from onnxexec.loaders.ggml_types import BLOCK, GGMLType

SHAPES = [(576, 576), (1536, 576), (576, 1536), (49152, 576)]  # (N, K) = W's rows, cols


def _random_raw(t: GGMLType, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Random bytes with small finite half scales (every bit pattern is a valid block)."""
    block, size = BLOCK[t]
    if t == GGMLType.F32:
        return rng.standard_normal(n * k).astype(np.float32).view(np.uint8)
    if t in (GGMLType.F16, GGMLType.BF16):
        return (rng.integers(0x2000, 0x3000, n * k, dtype=np.uint16)).view(np.uint8)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    halves = rng.integers(0x1000, 0x2000, raw.shape[0], dtype=np.uint16).view(np.uint8)
    for off in (0, 2, size - 4, size - 2):  # where the half scales live: keep them modest
        raw[:, off : off + 2] = halves.reshape(-1, 2)
    return raw.reshape(-1)


_clock = time.perf_counter


def _time(fn, min_time: float) -> float:
    """Best of repeated runs. With one thread the clock is the thread's CPU time, which
    other processes on a shared machine do not inflate."""
    fn()
    best, spent, reps = float("inf"), 0.0, 0
    while spent < min_time or reps < 3:
        t0 = _clock()
        fn()
        dt = _clock() - t0
        best, spent, reps = min(best, dt), spent + dt, reps + 1
    return best


def bench_types(types: list[GGMLType], t_rows: list[int], min_time: float) -> None:
    rng = np.random.default_rng(0)
    print(
        f"{'type':7s} {'N x K':>12s} {'T':>4s} {'path':>5s} {'us':>9s} {'GFLOP/s':>8s} {'GB/s':>6s}"
    )
    for t in types:
        for n, k in SHAPES:
            if BLOCK[t][0] == q.QK_K and k % q.QK_K:
                k = 768
            raw = _random_raw(t, n, k, rng)
            w = prepare_weight(raw, t, (n, k))
            for tr in t_rows:
                x = rng.standard_normal((tr, k)).astype(np.float32)
                out = np.empty((tr, n), np.float32)
                dt = _time(lambda x=x, w=w, out=out: qmatmul(x, w, out=out), min_time)
                path = "int8" if (tr < BLAS_MIN_T and int(t) in FAST_TYPES) else "float"
                print(
                    f"{t.name:7s} {f'{n}x{k}':>12s} {tr:4d} {path:>5s} {dt * 1e6:9.1f} "
                    f"{2 * n * k * tr / dt / 1e9:8.1f} {raw.nbytes / dt / 1e9:6.1f}"
                )


def bench_model(path: str, min_time: float) -> None:
    from onnxexec.loaders.gguf_reader import read_gguf

    f = read_gguf(path)
    mats = {name: t for name, t in f.tensors.items() if len(t.shape) == 2}
    if "output.weight" not in mats and "token_embd.weight" in mats:
        mats["output (tied)"] = mats["token_embd.weight"]
    mats.pop("token_embd.weight", None)  # a row gather at decode time, not a matmul
    ws = [prepare_weight(t.data, t.ggml_type, t.shape) for t in mats.values()]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, w.shape[1])).astype(np.float32) for w in ws]
    outs = [np.empty((1, w.shape[0]), np.float32) for w in ws]

    def step() -> None:
        for x, w, o in zip(xs, ws, outs, strict=True):
            qmatmul(x, w, out=o)

    dt = _time(step, min_time)
    flops = sum(2 * w.shape[0] * w.shape[1] for w in ws)
    nbytes = sum(t.n_bytes for t in mats.values())
    print(
        f"{path}: {len(ws)} matmuls per token, {dt * 1e3:.2f} ms -> {1 / dt:.1f} tokens/s "
        f"(matmuls only), {flops / dt / 1e9:.1f} GFLOP/s, {nbytes / dt / 1e9:.1f} GB/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--types", default=",".join(q.type_name(t) for t in sorted(FAST_TYPES)))
    ap.add_argument("--T", default="1,128", help="activation rows, comma-separated")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per case")
    ap.add_argument("--model", help="time one decode step of this GGUF instead")
    args = ap.parse_args()
    global _clock
    if args.threads == 1:
        _clock = time.thread_time
    numba.set_num_threads(args.threads)
    if os.environ.get("CHUNK"):
        numba.set_parallel_chunksize(int(os.environ["CHUNK"]))
    with threadpool_limits(args.threads):
        if args.model:
            bench_model(args.model, args.min_time)
        else:
            types = [GGMLType[name] for name in args.types.split(",")]
            bench_types(types, [int(v) for v in args.T.split(",")], args.min_time)


if __name__ == "__main__":
    main()
