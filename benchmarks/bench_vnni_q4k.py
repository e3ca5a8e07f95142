"""Q4_K matmul: vnni_q4k's repacked weight vs ggml_simd_k on the GGUF bytes, same bits.

    PYTHONPATH=$PWD python benchmarks/bench_vnni_q4k.py [--n 1536] [--k 768] [--reps 7]

One process, the two kernels interleaved (best of --reps), one thread each (the serial
twin of simd_dot_many's kernel), for activation row counts 1 (decode), 4, 8, 64, 128
(prefill). Prints ms per product and the speedup; checks the outputs are equal bits.
Needs an AVX-512 VNNI host.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1536)
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)

    from onnxexec.kernels.quant import ggml_simd_k, vnni_q4k
    from onnxexec.kernels.quant import qtypes as q
    from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k8

    if not vnni_q4k.ENABLED:
        print("this host has no AVX-512 VNNI (or ONNXEXEC_ISA caps it): nothing to compare")
        return 1
    n, k = args.n, args.k
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, n * k // 256 * q.Q4_K_BYTES, dtype=np.uint8)
    blocks = raw.reshape(-1, q.Q4_K_BYTES)
    blocks[:, 0:4] = np.frombuffer(np.float16([0.01, 0.002]).tobytes(), np.uint8)
    pk = vnni_q4k.repack(raw, n, k)
    kern = ggml_simd_k.DOT_MANY[1]
    print(f"Q4_K {n} x {k}, one thread")
    print(f"{'T':>4} {'ggml_simd_k ms':>15} {'vnni_q4k ms':>12} {'speedup':>8}")
    for t_rows in (1, 4, 8, 64, 128):
        x = rng.standard_normal((t_rows, k)).astype(np.float32)
        rows4 = t_rows - t_rows % 4
        xk = quantize_q8_k8(x, rows4)
        outs = {}
        best = {}
        for name, w, kind in (
            ("gguf", raw, ggml_simd_k.Q4_K_KIND),
            ("packed", pk, ggml_simd_k.PACKED_Q4_K_KIND),
        ):
            out = np.empty((t_rows, n), np.float32)
            call = (
                (w,), (n and raw.size // n,), (kind,), (0,), np.zeros((1, 32), np.int8),
                np.zeros((1, 3, 1), np.float32), *xk, rows4, out, 1, 4,
            )  # fmt: skip
            kern(*call)
            outs[name] = (out, call)
            best[name] = float("inf")
        assert np.array_equal(outs["gguf"][0].view(np.uint32), outs["packed"][0].view(np.uint32))
        for _ in range(args.reps):
            for name in best:
                s = time.perf_counter()
                kern(*outs[name][1])
                best[name] = min(best[name], time.perf_counter() - s)
        g, p = best["gguf"] * 1e3, best["packed"] * 1e3
        print(f"{t_rows:>4} {g:>15.3f} {p:>12.3f} {g / p:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
