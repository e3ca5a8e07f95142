"""Intra-op parallelism for the fused kernels: split a range of independent work items
(rows, heads, output columns) into contiguous spans and let the calling thread and a
small persistent pool take spans from a shared counter until none are left.

The work functions are numba kernels compiled with nogil=True, or numpy calls that
release the GIL (BLAS, large ufunc loops), so spans really run concurrently. The
caller never waits for a worker that has not started: on a busy machine a woken
worker may not get a core for milliseconds, so the caller simply takes its spans
too, and only waits for spans a worker is already running. BLAS itself is kept
single-threaded (runtime/threads.py): nested spin-waiting pools fight over the cores,
and on a busy 2-core machine OpenBLAS's own 2-thread sgemm ran 3-10x slower than
two independent single-threaded halves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import count

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_threads = 1
_SPANS_PER_THREAD = 2  # finer spans balance uneven progress between threads


def set_num_threads(n: int) -> None:
    """Use `n` threads (the caller plus n - 1 pool workers) for parallel_for."""
    global _pool, _threads
    n = max(1, int(n))
    with _lock:
        if n == _threads and (_pool is not None or n == 1):
            return
        old, _pool = (
            _pool,
            (ThreadPoolExecutor(n - 1, thread_name_prefix="onnxexec") if n > 1 else None),
        )
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


class _Job:
    """Spans handed out by an atomic counter; the caller waits for running spans only."""

    def __init__(self, fn: Callable[[int, int], object], spans: list[tuple[int, int]]) -> None:
        self.fn = fn
        self.spans = spans
        self.next = count()  # next(count) is atomic under the GIL
        self.done = 0
        self.cv = threading.Condition()
        self.error: BaseException | None = None

    def work(self) -> None:
        total = len(self.spans)
        while True:
            i = next(self.next)
            if i >= total:
                return
            try:
                if self.error is None:
                    self.fn(*self.spans[i])
            except BaseException as e:  # re-raised in the caller
                self.error = self.error or e
            with self.cv:
                self.done += 1
                if self.done == total:
                    self.cv.notify_all()

    def wait(self) -> None:
        with self.cv:
            while self.done < len(self.spans):
                self.cv.wait()
        if self.error is not None:
            raise self.error


def parallel_for(fn: Callable[[int, int], object], n_items: int, min_chunk: int = 1) -> None:
    """Call fn(start, stop) over disjoint spans covering range(n_items), concurrently.

    A span holds at least `min_chunk` items, so small jobs stay on the calling thread
    (waking a worker costs tens of microseconds).
    """
    if n_items <= 0:
        return
    pool = _pool
    parts = min(_threads * _SPANS_PER_THREAD, n_items // max(1, min_chunk))
    if parts <= 1 or pool is None:
        fn(0, n_items)
        return
    job = _Job(fn, chunks(n_items, parts))
    for _ in range(min(_threads - 1, parts - 1)):
        pool.submit(job.work)
    job.work()
    job.wait()
