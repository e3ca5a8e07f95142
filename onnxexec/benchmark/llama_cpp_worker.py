"""The llama.cpp side of the GGUF benchmark, run as a separate process.

llama.cpp and numba's parallel layer both use the process's one libgomp, whose
wait policy is fixed when it loads: in one process, whichever engine loads first
sets it for both (our short spin cost llama.cpp 3-4x of its decode speed). A process
of its own gives llama.cpp its default tuning, as its users run it.

Run as a script (never imported by onnxexec): `python llama_cpp_worker.py MODEL
N_CTX THREADS`. It prints {"load_s": ...}, then answers each JSON line on stdin,
{"ids": [...], "n_decode": N, "warm": bool}, with one JSON line {"prefill_s",
"decode_s", "ids"}: one timed prefill of `ids` plus N - 1 greedy decode steps, timed
exactly as the parent times onnxexec (gguf_bench._round).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def main() -> None:
    model, n_ctx, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    import llama_cpp

    t = time.perf_counter()
    llm = llama_cpp.Llama(
        model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=False
    )
    load_s = time.perf_counter() - t
    n_vocab = llm.n_vocab()

    def last_logits(ids: list[int]) -> np.ndarray:
        # without logits_all, Llama.eval keeps no scores: read the last row directly
        llm.eval(ids)
        return np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))

    sys.stdout.write(json.dumps({"load_s": load_s}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        req = json.loads(line)
        ids, n_decode = req["ids"], req["n_decode"]
        llm.reset()
        t0 = time.perf_counter()
        out = [int(np.argmax(last_logits(ids)))]
        t1 = time.perf_counter()
        for _ in range(n_decode - 1):
            out.append(int(np.argmax(last_logits([out[-1]]))))
        t2 = time.perf_counter()
        sys.stdout.write(json.dumps({"prefill_s": t1 - t0, "decode_s": t2 - t1, "ids": out}))
        sys.stdout.write("\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
