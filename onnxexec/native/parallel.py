"""Intra-op parallelism for the fused kernels: split a range of independent work items
(rows, heads, output columns) into contiguous spans and let the calling thread and a
small persistent pool take spans from a shared counter until none are left.

The caller never waits for a worker that has not started: on a busy machine a woken
worker may not get a core for milliseconds, so the caller simply takes its spans
too, and only waits for spans a worker is already running. BLAS itself is kept
single-threaded (runtime/threads.py): nested spin-waiting pools fight over the cores,
and on a busy 2-core machine OpenBLAS's own 2-thread sgemm ran 3-10x slower than
two independent single-threaded halves.

Two kinds of job share the pool:
- `parallel_for(fn, n)`: fn is a Python callable whose body releases the GIL (a
  nogil numba kernel, BLAS through numpy). Each worker must take the GIL to start.
- native jobs (`Pool.run_native`, used by gemm.linear): the span kernel is numba
  code the workers call without ever touching the GIL; the job's arguments sit in a
  shared int64 array, its kernel's C address in one of its slots (kernels/span_fns.py:
  a process loads only the kinds of kernel it runs).

Hand-offs spin before they sleep: a worker that finished a job watches the job
counter for ~0.2 ms (GIL released) before it sleeps on the futex of that counter
(in compiled code: waking it takes no GIL; a condition variable without futexes), and a
native job's caller watches the done counter. A futex wake-up of an idle virtual CPU
cost 50-100+ us here, as much as half a 768 x 768 product, and a model runs hundreds
of jobs back to back. A Python job still pays one GIL hand-off per worker (CPython's
GIL is a futex too): that is what the native jobs avoid. The spin is an atomic load in
a loop: the x86 PAUSE instruction traps to the hypervisor on this kind of VM
(pause-loop exiting, ~10 us a PAUSE).

Native job protocol (slots of `ctrl`): one word, CLAIM, holds the job number, its
kind, its span count and the next span; a thread takes a span by compare-and-swap
on it and only then reads the job's arguments. The caller writes a job only when the
previous one is finished (every taken span reported DONE), so arguments never
change under a thread holding a span, and a thread that wakes up late finds the
word of a newer job (or no span left) instead of stale arguments. A Python job posts
one token per worker: the worker that takes one returns to Python to run it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from itertools import count

import numpy as np

from onnxexec.kernels import intrinsics, tuning
from onnxexec.kernels import objload as nb
from onnxexec.kernels.intrinsics import (
    atomic_add,
    atomic_cas,
    atomic_load,
    atomic_store,
    call_span,
    cycles,
    futex_wait,
    futex_wake,
)
from onnxexec.kernels.objload import warm
from onnxexec.kernels.span_fns import address as span_address
from onnxexec.native.affinity import RunPin, pin, pin_caller, process_cpus
from onnxexec.native.affinity import begin_run as begin_pinned_run
from onnxexec.native.schedstat import CoreWaits

_lock = threading.Lock()
recorded = threading.local()  # .jobs: the native jobs a native/launch.py recording saw
_threads = 1
SPANS_PER_THREAD = tuning.SPANS_PER_THREAD  # finer spans balance uneven progress between threads
_SPIN_SECONDS = 2e-4  # how long a hand-off spins before it sleeps (see Pool._adapt)

# ctrl slots (hot words a cache line apart)
CLAIM, DONE, SLEEPERS = 0, 8, 16
KIND, NSPANS, WAITING, SYSC, TICKS, IDLE_TS, ARGS, BOUNDS = 32, 33, 34, 35, 36, 37, 40, 64
SPANFN = 39  # the posted job's span kernel (its C address, kernels/span_fns.py)
MAX_SPANS = 32
KIND_PY, KIND_GEMM, KIND_PACKED, KIND_DW, KIND_IM2COL = 0, 1, 2, 3, 4
KIND_IM2ROW, KIND_TAPS, KIND_ATTN, KIND_PW, KIND_DIRECT, KIND_POOL = 5, 6, 7, 8, 9, 10
KIND_PWT = 11
# CLAIM word: job number << 36 | kind << 32 | spans << 16 | next span
_SPAN_BITS, _KIND_SHIFT, _JOB_SHIFT = 0xFFFF, 32, 36


@nb.njit(nogil=True, cache=True)
def _spin_while(flag, value, ticks):
    """Wait (GIL released) until flag[0] != value, at most `ticks`; whether it changed."""
    start = cycles()
    while cycles() - start < ticks:
        if atomic_load(flag, 0) != value:
            return True
    return atomic_load(flag, 0) != value


@nb.njit(nogil=True, cache=True)
def _claim(ctrl):
    """Take the next span of the posted job: (kind, span index), or (-1, -1) if none is
    left. The job's slots stay valid until a taken span is reported done."""
    while True:
        c = atomic_load(ctrl, CLAIM)
        nxt = c & _SPAN_BITS
        if nxt >= (c >> 16) & _SPAN_BITS:
            return -1, -1
        if atomic_cas(ctrl, CLAIM, c, c + 1):
            return (c >> _KIND_SHIFT) & 0xF, nxt


@nb.njit(nogil=True, cache=True)
def _run(ctrl, fctrl, i):
    """Run native span i of the posted job (its kernel at address ctrl[SPANFN], see
    kernels/span_fns.py) and report it done."""
    call_span(
        ctrl[SPANFN], ctrl.ctypes.data + 8 * ARGS, fctrl.ctypes.data,
        ctrl[BOUNDS + i], ctrl[BOUNDS + i + 1],
    )  # fmt: skip
    atomic_add(ctrl, DONE, 1)
    if atomic_load(ctrl, WAITING):
        futex_wake(ctrl[SYSC], ctrl, DONE)


@nb.njit(nogil=True, cache=True)
def _sleep(ctrl):
    """Sleep on the CLAIM word's futex (GIL released) until a job is posted, at most
    ctrl[IDLE_TS] (a timespec). The sleeper counts itself before re-reading CLAIM
    and publish stores CLAIM before reading the count (both seq_cst), so either
    this thread sees the new job or publish sees it and wakes it."""
    c = atomic_load(ctrl, CLAIM)
    atomic_add(ctrl, SLEEPERS, 1)
    if atomic_load(ctrl, CLAIM) == c and (c & _SPAN_BITS) >= (c >> 16) & _SPAN_BITS:
        futex_wait(ctrl[SYSC], ctrl, CLAIM, c, ctrl[IDLE_TS : IDLE_TS + 2])
    atomic_add(ctrl, SLEEPERS, -1)


@nb.njit(nogil=True, cache=True, inline="always")
def _worker(ctrl, fctrl):
    """A worker's wait-and-run loop: runs native spans until it takes a Python job's
    token (returns True). Idle for ctrl[TICKS], it sleeps on a futex without leaving
    compiled code, so waking it for a native job needs no GIL; without futexes it
    returns False instead (the caller sleeps on a condition variable)."""
    start = cycles()
    while True:
        kind, i = _claim(ctrl)
        if kind < 0:
            if cycles() - start > ctrl[TICKS]:
                if ctrl[SYSC] == 0:
                    return False
                _sleep(ctrl)
                start = cycles()
            continue
        if kind == KIND_PY:
            return True
        _run(ctrl, fctrl, i)
        start = cycles()


@nb.njit(nogil=True, cache=True)
def publish(ctrl, job, kind, bounds):
    """Post job number `job` over spans [bounds[i], bounds[i + 1]) (a Python job: one
    token per worker); its arguments are already in ctrl[ARGS:] / fctrl."""
    n = bounds.shape[0] - 1
    ctrl[KIND] = kind
    ctrl[NSPANS] = n
    for i in range(n + 1):
        ctrl[BOUNDS + i] = bounds[i]
    atomic_store(ctrl, DONE, 0)
    tag = (job & 0x7FFFFFF) << _JOB_SHIFT  # 27 bits: a changed word, never a sign flip
    atomic_store(ctrl, CLAIM, tag | (kind << _KIND_SHIFT) | (n << 16))
    if ctrl[SYSC] != 0 and atomic_load(ctrl, SLEEPERS) > 0:
        futex_wake(ctrl[SYSC], ctrl, CLAIM)


@nb.njit(nogil=True, cache=True, inline="always")
def join_workers(ctrl, fctrl, timeout):
    """Run spans of the posted native job, then wait for the rest: spin ctrl[TICKS],
    then sleep on the DONE futex (without one, return False: the caller sleeps)."""
    while True:
        kind, i = _claim(ctrl)
        if kind < 0:
            break
        _run(ctrl, fctrl, i)
    n = ctrl[NSPANS]
    start = cycles()
    while atomic_load(ctrl, DONE) < n:
        if cycles() - start > ctrl[TICKS]:
            break
    if ctrl[SYSC] == 0:
        return atomic_load(ctrl, DONE) >= n
    while True:
        d = atomic_load(ctrl, DONE)
        if d >= n:
            break
        atomic_store(ctrl, WAITING, 1)  # before re-reading DONE: see _run
        if atomic_load(ctrl, DONE) == d:
            futex_wait(ctrl[SYSC], ctrl, DONE, d, timeout)
    atomic_store(ctrl, WAITING, 0)
    return True


@nb.njit(nogil=True, cache=True)
def serve(ctrl, fctrl, worker, timeout):
    """A worker's loop (_worker) or a caller's join (join_workers), in one compiled function:
    the process loads one library for both sides of a hand-off, not two (the span
    kernels themselves sit behind addresses, kernels/span_fns.py)."""
    if worker:
        return _worker(ctrl, fctrl)
    return join_workers(ctrl, fctrl, timeout)


@nb.njit(nogil=True, cache=True)
def _read_cycles():
    return cycles()


def _claimable(claim: int) -> bool:
    return (claim & _SPAN_BITS) < ((claim >> 16) & _SPAN_BITS)


class _Job:
    """Python spans handed out by an atomic counter; the caller waits for running spans."""

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

    def wait(self, ticks: int) -> None:
        if not self.finished[0] and not _spin_while(self.finished, 0, ticks):
            with self.cv:
                while not self.finished[0]:
                    self.cv.wait()
        if self.error is not None:
            raise self.error


class Pool:
    """n persistent workers that run the posted job's spans alongside the caller."""

    def __init__(self, n: int) -> None:
        # Spin lengths in time-stamp counter ticks: assume 3 GHz until _adapt has
        # measured the counter's rate against perf_counter over the first ~20 ms.
        self.spin_ticks = int(3e9 * _SPIN_SECONDS)
        self.min_ticks = max(1, self.spin_ticks // 40)  # ~5 us
        self.calibration: tuple[float, int] | None = None
        self.next_check = 0.0
        self.core_waits = CoreWaits()
        self.ctrl = np.zeros(BOUNDS + MAX_SPANS + 1, dtype=np.int64)
        self.ctrl[SYSC] = intrinsics.SYSCALL
        self.ctrl[TICKS] = self.spin_ticks
        self.ctrl[IDLE_TS : IDLE_TS + 2] = (0, 100_000_000)  # an idle worker rechecks every 0.1 s
        self.fctrl = np.zeros(4, dtype=np.float64)
        self.job: _Job | None = None
        self.jobs = 0  # jobs posted (the caller holds `busy` while posting)
        self.tokens = np.arange(min(n, MAX_SPANS) + 1, dtype=np.int64)  # a token per worker
        self.cv = threading.Condition()
        self.sleeping = 0
        self.closed = False
        self.busy = threading.Lock()  # one job at a time (sessions may run concurrently)
        # started with the first job: their first kernel call loads numba's compiled
        # code, which would otherwise compete with session creation for the GIL
        self.workers = [
            threading.Thread(target=self._loop, args=(i,), name=f"onnxexec-{i}", daemon=True)
            for i in range(n)
        ]
        self.started = False
        self.cpus = process_cpus(n)
        # what begin_run leaves the caller: the CPUs no worker is pinned to
        self.caller_cpus = frozenset(self.cpus[: len(self.cpus) - n]) if self.cpus else None

    def _loop(self, index: int) -> None:
        pin(index, self.cpus)
        while not self.closed:
            if serve(self.ctrl, self.fctrl, True, TIMEOUT):
                job = self.job
                if job is not None and not self.closed:
                    job.work()
                continue
            with self.cv:
                self.sleeping += 1  # before reading CLAIM: see _wake
                while not _claimable(int(self.ctrl[CLAIM])) and not self.closed:
                    self.cv.wait()
                self.sleeping -= 1

    def _wake(self) -> None:
        # A worker going to sleep counts itself before it reads CLAIM, so it either
        # sees the new job or is counted here (the GIL orders these steps).
        if self.sleeping:
            with self.cv:
                self.cv.notify_all()

    def _adapt(self) -> None:
        """Spin only while the machine has cores to spare. Every ~50 ms the caller reads
        its thread's scheduler statistics: if it spent over 5% of that time waiting
        for a core, other processes want the CPUs and a spinning thread would take
        time from them and from our own threads (a model ran 7-15% slower), so
        hand-offs sleep at once until the contention goes away. The first calls also
        start the workers and measure the time-stamp counter's rate."""
        now = time.perf_counter()
        if now < self.next_check:
            return
        self.next_check = now + 0.05
        if not self.started:
            self.started = True
            # Load the workers' loop in this thread: numba links a cached kernel in
            # the thread that first dispatches it, and a worker thread's link left
            # LLVM's working memory in a malloc arena of that thread's own, never
            # reused (13 MB of MobileNetV2's 159 MB peak when the loop still linked
            # every span kernel); in the main arena it reuses what session creation
            # freed.
            warm(serve, self.ctrl, self.fctrl, True, TIMEOUT)
            for t in self.workers:
                t.start()
        if self.calibration is None:
            # the first _read_cycles() loads numba's code (milliseconds): read the
            # counter once before taking the pair, or the rate comes out far too low
            # (0.89 GHz measured for a 2.6 GHz counter, so every spin was a third of
            # its length)
            _read_cycles()
            self.calibration = (time.perf_counter(), _read_cycles())
            self.next_check = now + 0.02
        elif self.calibration[0] > 0:
            rate = (_read_cycles() - self.calibration[1]) / (
                time.perf_counter() - self.calibration[0]
            )
            if rate > 0:
                self.spin_ticks = max(1, int(rate * _SPIN_SECONDS))
                self.min_ticks = max(1, self.spin_ticks // 40)
            self.calibration = (0.0, 0)
        contended = self.core_waits.contended()
        if contended is not None:
            self.ctrl[TICKS] = self.min_ticks if contended else self.spin_ticks

    def post_python(self, job: _Job) -> None:
        if self.caller_cpus is not None:
            pin_caller(self.caller_cpus)
        self._adapt()
        self.job = job
        self.jobs += 1
        publish(self.ctrl, self.jobs, KIND_PY, self.tokens)
        self._wake()

    def run_native(self, kind: int, bounds: np.ndarray) -> None:
        """Run the native job whose arguments were written to ctrl[ARGS:BOUNDS] / fctrl
        (only between jobs: the previous one is finished) over spans
        [bounds[i], bounds[i + 1]).

        bounds: int64, 2 to MAX_SPANS + 1 entries (checked, ValueError otherwise: they
        are copied into the control block's fixed span table without bounds checks)."""
        n = bounds.shape[0] - 1 if bounds.ndim == 1 else -1
        if not 0 < n <= MAX_SPANS or bounds.dtype != np.int64:
            raise ValueError(f"native job: {n} spans of {bounds.dtype} (1 to {MAX_SPANS} int64)")
        if self.caller_cpus is not None:
            pin_caller(self.caller_cpus)
        self.ctrl[SPANFN] = span_address(kind)
        self.jobs += 1
        publish(self.ctrl, self.jobs, kind, bounds)
        self._wake()
        self._adapt()
        while not serve(self.ctrl, self.fctrl, False, TIMEOUT):
            time.sleep(2e-5)  # a worker is still running a span: let it have the core
        jobs = getattr(recorded, "jobs", None)
        if jobs is not None:  # native/launch.py: replayable only if its site says so
            jobs.append(None)

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.job = None
            self.jobs += 1
            publish(self.ctrl, self.jobs, KIND_PY, self.tokens)
            self.cv.notify_all()


def begin_run() -> RunPin | None:
    """affinity.begin_run with this pool's caller CPUs (None without a pool)."""
    return begin_pinned_run(_pool.caller_cpus if _pool is not None else None)


TIMEOUT = np.array([0, 1_000_000], dtype=np.int64)  # futex timeout (timespec): 1 ms
_pool: Pool | None = None


def set_num_threads(n: int) -> None:
    """Use `n` threads (the caller plus n - 1 pool workers) for parallel_for."""
    global _pool, _threads
    n = max(1, int(n))
    with _lock:
        if n == _threads and (_pool is not None or n == 1):
            return
        old, _pool = _pool, (Pool(n - 1) if n > 1 else None)
        _threads = n
    if old is not None:
        with old.busy:
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
    parts = _threads * SPANS_PER_THREAD if spans is None else spans
    parts = min(parts, n_items // max(1, min_chunk))
    if parts <= 1 or pool is None or not pool.busy.acquire(blocking=False):
        fn(0, n_items)
        return
    try:
        job = _Job(fn, chunks(n_items, parts))
        pool.post_python(job)
        job.work()
        job.wait(int(pool.ctrl[TICKS]))
    finally:
        pool.busy.release()


def native_pool() -> Pool | None:
    """The pool, locked for one native job (release pool.busy after), or None when
    single-threaded or busy with another caller's job (then run serially)."""
    pool = _pool
    if pool is None or not pool.busy.acquire(blocking=False):
        return None
    return pool
