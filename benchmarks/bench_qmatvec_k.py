"""One-token (decode) product speed per weight group of a K-quant GGUF, in GB/s.

    python benchmarks/bench_qmatvec_k.py                 # the Q4_K_M mix, 1 and 2 threads
    python benchmarks/bench_qmatvec_k.py --threads 2 --model M.gguf --min-time 0.5

Times ggml_simd_k's DOT_MANY (what kernels/attn/llm_decode.py runs per decode matmul group)
on the real weights, T = 1, activations quantized once beforehand: per type mix of a
layer group (Q|K|V, O, gate|up, down) one compiled call runs that group of every
layer having that mix in turn (so the weights stream from memory as in a decode step,
not from cache), and the output head. GB/s counts the weights' GGUF bytes. At 1
thread the clock is the process CPU time (steadier on a shared machine), else wall
time; best of the runs.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

import onnxexec.runtime.threads  # noqa: F401  (numba's OpenMP wait policy, as onnxexec runs)
from onnxexec.kernels.math.lanes import pick
from onnxexec.kernels.quant import ggml_simd, ggml_simd_k
from onnxexec.kernels.quant.actquant import quantize_act8
from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k8
from onnxexec.loaders.gguf_reader import read_gguf

_DOT_PAR, _DOT_SER = ggml_simd_k.DOT_MANY
DEFAULT = "/root/.cache/onnxexec/models/smollm2-wide-190M-Q4_K_M.gguf"
GROUPS = (("attn_q", "attn_k", "attn_v"), ("attn_output",), ("ffn_gate", "ffn_up"), ("ffn_down",))


def _groups(path: str) -> dict[str, list[list]]:
    """label -> the tensors of every layer's group of that type mix, and the head."""
    f = read_gguf(path)
    ts = {t.name: t for t in (f.tensors.values() if isinstance(f.tensors, dict) else f.tensors)}
    n_layers = 1 + max(int(n.split(".")[1]) for n in ts if n.startswith("blk."))
    out: dict[str, list[list]] = {}
    for names in GROUPS:
        for i in range(n_layers):
            tens = [ts[f"blk.{i}.{n}.weight"] for n in names]
            label = "+".join(f"{n}:{t.ggml_type.name}" for n, t in zip(names, tens, strict=True))
            out.setdefault(f"{label} K={tens[0].shape[1]}", []).append(tens)
    head = ts.get("output.weight", ts["token_embd.weight"])
    out[f"head:{head.ggml_type.name} K={head.shape[1]}"] = [[head]]
    return out


@numba.njit(nogil=True)
def _run_par(gs, n_chunks):
    """Every group of gs in turn (as a decode step: a parallel region each)."""
    for g in gs:
        _DOT_PAR(*g, n_chunks)


@numba.njit(nogil=True)
def _run_ser(gs, n_chunks):
    for g in gs:
        _DOT_SER(*g, n_chunks)


def _args(tens: list, rng: np.random.Generator) -> tuple:
    k = tens[0].shape[1]  # (N, K), numpy order
    raws, rbs, kinds, offs, c = [], [], [], [], 0
    for t in tens:
        n = t.shape[0]
        raw = np.ascontiguousarray(np.asarray(t.data).view(np.uint8).reshape(-1))
        raws.append(raw)
        rbs.append(raw.shape[0] // n)
        kinds.append(ggml_simd.KINDS.get(t.ggml_type, ggml_simd_k.KINDS.get(t.ggml_type, -1)))
        offs.append(c)
        c += n
    x = rng.standard_normal((1, k)).astype(np.float32)
    x8, xst = quantize_act8(x)
    xk8, xkd, xkbs = quantize_q8_k8(x, 0)
    out = np.empty((1, c), np.float32)
    w = (tuple(raws), tuple(rbs), tuple(kinds), tuple(offs))
    nbytes = sum(r.nbytes for r in raws)
    return (*w, x8, xst, xk8, xkd, xkbs, 0, out), nbytes, c * k


@numba.njit(parallel=True, nogil=True)
def _evict(buf):
    """Read buf (bigger than the last-level cache), so the weights come from memory."""
    s = np.zeros(16, np.int64)
    n = buf.shape[0]
    for c in numba.prange(16):
        for i in range(c * n // 16, (c + 1) * n // 16, 8):
            s[c] += buf[i]
    return s.sum()


def _time(fn, min_time: float, cpu: bool, buf: np.ndarray | None) -> float:
    clock = time.process_time if cpu else time.perf_counter
    fn()
    best, t_end, reps = float("inf"), time.perf_counter() + min_time, 0
    while time.perf_counter() < t_end or reps < 5:
        if buf is not None:
            _evict(buf)
        t0 = clock()
        fn()
        best, reps = min(best, clock() - t0), reps + 1
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--hot", action="store_true", help="no cache eviction between runs")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    buf = None if a.hot else np.ones(512 << 17, np.int64)  # 512 MiB
    groups = []
    for label, layers in _groups(a.model).items():
        built = [_args(tens, rng) for tens in layers]
        gs = tuple(b[0] for b in built)
        groups.append((f"{label} x{len(gs)}", gs, sum(b[1] for b in built), built[0][2]))
    for nt in (int(s) for s in a.threads.split(",")):
        numba.set_num_threads(nt)
        print(f"threads={nt}")
        total_s = 0.0
        for label, args, nbytes, macs in groups:
            kern, n_chunks = pick(ggml_simd_k.DOT_MANY, macs)
            run = _run_par if kern is _DOT_PAR else _run_ser
            s = _time(lambda: run(args, n_chunks), a.min_time, nt == 1, buf)  # noqa: B023
            total_s += s
            mib, gbs = nbytes / 2**20, nbytes / s / 1e9
            print(f"  {label:60s} {mib:7.2f} MiB {s * 1e6:8.1f} us {gbs:6.2f} GB/s")
        print(f"  sum {total_s * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
