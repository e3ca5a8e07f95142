"""Intra-op parallelism for the fused kernels: split a range of independent work items
(rows, heads, output columns) into one contiguous chunk per thread and run the chunks
on a small persistent pool, the calling thread taking the first one.

The work functions are numba kernels compiled with nogil=True, or numpy calls that
release the GIL (BLAS, large ufunc loops), so the chunks really run concurrently.
BLAS itself is kept single-threaded (runtime/threads.py): nested thread pools that
spin-wait fight over the cores, and on a busy 2-core machine OpenBLAS's own 2-thread
sgemm ran 3-10x slower than two independent single-threaded halves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_threads = 1


def set_num_threads(n: int) -> None:
    """Use `n` threads (the caller plus n - 1 pool workers) for parallel_for."""
    global _pool, _threads
    n = max(1, int(n))
    with _lock:
        if n == _threads and (_pool is not None or n == 1):
            return
        old, _pool = _pool, (ThreadPoolExecutor(n - 1, thread_name_prefix="onnxexec") if n > 1
                             else None)
        _threads = n
    if old is not None:
        old.shutdown(wait=False)


def num_threads() -> int:
    return _threads


def chunks(n_items: int, parts: int) -> list[tuple[int, int]]:
    """`parts` contiguous [start, stop) ranges covering range(n_items), sizes within one."""
    parts = max(1, min(parts, n_items))
    base, extra = divmod(n_items, parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + base + (i < extra)
        out.append((start, stop))
        start = stop
    return out


def parallel_for(fn: Callable[[int, int], object], n_items: int, min_chunk: int = 1) -> None:
    """Call fn(start, stop) over disjoint chunks of range(n_items), concurrently.

    A chunk holds at least `min_chunk` items, so small jobs stay on the calling thread
    (waking a worker costs tens of microseconds).
    """
    if n_items <= 0:
        return
    pool = _pool
    parts = min(_threads, n_items // max(1, min_chunk))
    if parts <= 1 or pool is None:
        fn(0, n_items)
        return
    spans = chunks(n_items, parts)
    futures: list[Future] = [pool.submit(fn, a, b) for a, b in spans[1:]]
    try:
        fn(*spans[0])
    finally:
        for f in futures:
            f.result()
