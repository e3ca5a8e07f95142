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

Hand-offs spin before they sleep. A worker that finished a job watches the job
counter for a short while (about 0.2 ms, without the GIL) before it blocks on a
condition variable, and the caller likewise watches a finished flag before blocking:
a futex wake-up of an idle virtual CPU cost 50-100+ us here, as much as a whole
768 x 768 product's half, and a model runs hundreds of these jobs back to back. The
spin is a plain atomic load in a loop: the x86 PAUSE instruction traps to the
hypervisor on this kind of VM (pause-loop exiting, ~10 us a PAUSE).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from itertools import count

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_lock = threading.Lock()
_threads = 1
_SPANS_PER_THREAD = 2  # finer spans balance uneven progress between threads
_SPIN_SECONDS = 2e-4  # how long a hand-off spins before it sleeps


@intrinsic
def _load_acquire(typingctx, arr):
    """arr[0] of an int64 array as an atomic acquire load (re-read on every call)."""
    sig = types.int64(arr)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(ary.data, ir.IntType(64).as_pointer())
        return builder.load_atomic(ptr, "acquire", 8)

    return sig, codegen


@intrinsic
def _cycles(typingctx):
    """The time-stamp counter (llvm.readcyclecounter)."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return sig, codegen


@nb.njit(nogil=True, cache=True)
def _spin_while(flag, value, cycles):
    """Wait (GIL released) until flag[0] != value, at most `cycles` counter ticks;
    whether it changed."""
    start = _cycles()
    while _cycles() - start < cycles:
        if _load_acquire(flag) != value:
            return True
    return _load_acquire(flag) != value


@nb.njit(nogil=True, cache=True)
def _read_cycles():
    return _cycles()


def _calibrate() -> int:
    """Counter ticks in _SPIN_SECONDS (the counter runs at a fixed rate, not the clock)."""
    _spin_while(np.zeros(1, np.int64), 0, 0)  # compile / load before timing
    t0, c0 = time.perf_counter(), _read_cycles()
    while time.perf_counter() - t0 < 1e-3:
        pass
    rate = (_read_cycles() - c0) / (time.perf_counter() - t0)
    return max(1, int(rate * _SPIN_SECONDS)) if rate > 0 else 1


class _Job:
    """Spans handed out by an atomic counter; the caller waits for running spans only."""

    def __init__(self, fn: Callable[[int, int], object], spans: list[tuple[int, int]]) -> None:
        self.fn = fn
        self.spans = spans
        self.next = count()  # next(count) is atomic under the GIL
        self.done = count(1)
        self.finished = np.zeros(1, dtype=np.int64)  # set to 1 by the last span to end
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
            if next(self.done) == total:
                self.finished[0] = 1
                with self.cv:
                    self.cv.notify_all()

    def wait(self, spin_cycles: int) -> None:
        if not self.finished[0] and not _spin_while(self.finished, 0, spin_cycles):
            with self.cv:
                while not self.finished[0]:
                    self.cv.wait()
        if self.error is not None:
            raise self.error


class _Pool:
    """n persistent workers that run the posted job's spans alongside the caller."""

    def __init__(self, n: int) -> None:
        self.spin = _calibrate()
        self.gen = np.zeros(1, dtype=np.int64)  # bumped (by the caller only) per job
        self.job: _Job | None = None
        self.cv = threading.Condition()
        self.sleeping = 0
        self.closed = False
        self.workers = [
            threading.Thread(target=self._loop, name=f"onnxexec-{i}", daemon=True)
            for i in range(n)
        ]
        for t in self.workers:
            t.start()

    def _loop(self) -> None:
        seen = 0
        while True:
            if not _spin_while(self.gen, seen, self.spin):
                with self.cv:
                    self.sleeping += 1  # before re-checking gen: see post()
                    while int(self.gen[0]) == seen and not self.closed:
                        self.cv.wait()
                    self.sleeping -= 1
            if self.closed:
                return
            seen = int(self.gen[0])
            job = self.job
            if job is not None:
                job.work()

    def post(self, job: _Job) -> None:
        self.job = job
        self.gen[0] += 1
        # A worker going to sleep counts itself before it re-reads gen, so it either
        # sees the new gen or is counted here (the GIL orders these steps).
        if self.sleeping:
            with self.cv:
                self.cv.notify_all()

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.job = None
            self.gen[0] += 1
            self.cv.notify_all()


_pool: _Pool | None = None


def set_num_threads(n: int) -> None:
    """Use `n` threads (the caller plus n - 1 pool workers) for parallel_for."""
    global _pool, _threads
    n = max(1, int(n))
    with _lock:
        if n == _threads and (_pool is not None or n == 1):
            return
        old, _pool = _pool, (_Pool(n - 1) if n > 1 else None)
        _threads = n
    if old is not None:
        old.close()


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


def parallel_for(
    fn: Callable[[int, int], object],
    n_items: int,
    min_chunk: int = 1,
    spans: int | None = None,
) -> None:
    """Call fn(start, stop) over disjoint spans covering range(n_items), concurrently.

    A span holds at least `min_chunk` items, so small jobs stay on the calling thread
    (handing a span to a worker costs microseconds). `spans` overrides the number of
    spans (default: two per thread).
    """
    if n_items <= 0:
        return
    pool = _pool
    parts = _threads * _SPANS_PER_THREAD if spans is None else spans
    parts = min(parts, n_items // max(1, min_chunk))
    if parts <= 1 or pool is None:
        fn(0, n_items)
        return
    job = _Job(fn, chunks(n_items, parts))
    pool.post(job)
    job.work()
    job.wait(pool.spin)
