"""Packed-weight sgemm speed (kernels/linalg/sgemm_packed.py) at transformer shapes, GFLOP/s.

    python benchmarks/bench_sgemm_packed.py                  # all shapes, 2 threads
    python benchmarks/bench_sgemm_packed.py --models bert --threads 1

Columns: `blas 1T` np.matmul on one OpenBLAS thread; `pNN 1T` one thread through
packed_span on the weight packed NN columns wide (32: the AVX-512 tiles, 16: AVX2);
`linear` gemm.linear (OpenBLAS sgemm per span on the native pool, the path for
unpacked weights) and `linNN` gemm.linear_packed, both with the layer's epilogue
(bias, and GELU / SiLU where the model has one) on --threads threads. `err` is the
largest |linear_packed - float64 reference| over the shape's widths. Single-thread
columns time thread CPU time (other processes on a shared machine do not inflate it),
threaded ones wall time; each figure is the best of --reps runs. Take the lock on a
shared machine: `flock /tmp/bench.lock python benchmarks/bench_sgemm_packed.py`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import numpy as np
from threadpoolctl import threadpool_limits

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.linalg import gemm, sgemm_packed
from onnxexec.kernels.math.activations import epilogue_reference
from onnxexec.runtime.threads import set_threads

# (name, M, K, N, activation): the per-layer products at the bench_onnx.py inputs
SHAPES = {
    "bert": [  # BERT-base, seq 128
        ("qkv", 128, 768, 2304, ""),
        ("attn_out", 128, 768, 768, ""),
        ("ffn_up", 128, 768, 3072, "Gelu"),
        ("ffn_down", 128, 3072, 768, ""),
    ],
    "gpt2": [  # GPT-2 small, seq 64
        ("qkv", 64, 768, 2304, ""),
        ("attn_out", 64, 768, 768, ""),
        ("ffn_up", 64, 768, 3072, "Gelu"),
        ("ffn_down", 64, 3072, 768, ""),
    ],
    "llama": [  # SmolLM-style GQA, D 576, seq 64
        ("qkv", 64, 576, 960, ""),
        ("attn_out", 64, 576, 576, ""),
        ("gate_up", 64, 576, 3072, "Silu"),
        ("down", 64, 1536, 576, ""),
        ("lm_head", 64, 576, 49152, ""),
    ],
    "vit": [  # ViT-B/16, 197 tokens
        ("qkv", 197, 768, 2304, ""),
        ("attn_out", 197, 768, 768, ""),
        ("ffn_up", 197, 768, 3072, "Gelu"),
        ("ffn_down", 197, 3072, 768, ""),
    ],
}


def _best(fn: Callable[[], object], reps: int, clock: Callable[[], float]) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def _row(model: str, name: str, m: int, k: int, n: int, act: str, reps: int) -> str:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = (rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    code = ACT[act] if act else 0
    want = epilogue_reference(x.astype(np.float64) @ w + b, None, code, 0.0, 0.0)
    gflop = 2e-9 * m * k * n
    out = np.empty((m, n), dtype=np.float32)
    cells = [f"{model:6s}{name:9s}{m:4d}x{k:4d}x{n:<6d}"]
    with threadpool_limits(1):
        cells.append(gflop / _best(lambda: np.matmul(x, w, out=out), reps, time.thread_time))
        packs = {nr: sgemm_packed.pack(w, nr) for nr in sorted(sgemm_packed.WIDTHS, reverse=True)}
        for nr, wp in packs.items():
            args = (x.ctypes.data, k, m, k, wp.ctypes.data, n, out.ctypes.data, n, 0, len(wp), nr)
            span = partial(sgemm_packed.packed_span, *args)
            cells.append(gflop / _best(span, reps, time.thread_time))
    cells.append(gflop / _best(partial(gemm.linear, x, w, b, code), reps, time.perf_counter))
    err = 0.0
    for wp in packs.values():
        run = partial(gemm.linear_packed, x, wp, n, b, code)
        cells.append(gflop / _best(run, reps, time.perf_counter))
        err = max(err, float(np.abs(run() - want).max()))
    return "".join(f"{c:>8.0f}" if isinstance(c, float) else c for c in cells) + f"  {err:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    set_threads(args.threads, blas_threads=1)
    widths = sorted(sgemm_packed.WIDTHS, reverse=True)
    head = ["blas 1T", *(f"p{nr} 1T" for nr in widths), "linear", *(f"lin{nr}" for nr in widths)]
    print(f"{'':34s}" + "".join(f"{h:>8s}" for h in head) + "  err", flush=True)
    for model in args.models:
        for shape in SHAPES[model]:
            print(_row(model, *shape, args.reps), flush=True)


if __name__ == "__main__":
    main()
