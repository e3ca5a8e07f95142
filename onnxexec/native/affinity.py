"""Thread placement for the native pool (native/parallel.py): each worker pinned to
a core of its own, and the caller kept off the workers' cores while a run uses the
pool. Affinity calls only; the pool itself passes in the CPUs it read at creation."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np

from onnxexec.kernels import objload as nb


def pin(index: int, cpus: list[int] | None) -> None:
    """Keep worker `index` on a core of its own: the last of the process's CPUs (`cpus`,
    read when the pool was made) for worker 0, the one before for worker 1, ...,
    leaving the first to the caller.

    Woken by a futex, a thread is placed next to its waker when the scheduler thinks
    that cache-friendly, and on a 2-vCPU VM the worker then queued behind the very
    thread that had just handed it work while the other vCPU idled: the caller spent
    3-7 ms of a 9 ms MobileNetV2 run waiting for a core (schedstat), which also made
    _adapt take it for contention from other processes. Pinned, a worker can only run
    where it belongs. Skipped (cpus None) when there are not more CPUs than workers."""
    if cpus is None:
        return
    try:
        os.sched_setaffinity(0, {cpus[-1 - index]})  # 0: this thread (Linux)
    except OSError:
        pass


def process_cpus(workers: int) -> list[int] | None:
    """The CPUs to spread the caller and `workers` over (None: no more than workers).
    Read at pool creation: the workers start later, from a run whose caller
    begin_run may have pinned, and a thread inherits its creator's affinity."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    return cpus if len(cpus) > workers else None


_caller = threading.local()


@nb.njit(parallel=True, cache=True)
def start_team(out):
    for i in nb.prange(out.size):
        out[i] = i


class RunPin:
    """One run's pinning (begin_run): `saved` is the affinity end_run restores."""

    __slots__ = ("saved", "tried")

    def __init__(self) -> None:
        self.saved: set[int] | None = None
        self.tried = False


def begin_run(cpus: frozenset[int] | None) -> RunPin | None:
    """Open a run in this thread: at the run's first pool job the caller moves off the
    workers' cores (pin_caller) until end_run. `cpus` are the CPUs the pool leaves
    the caller (None when it pins no workers). None when there are none or a run is
    already open here (subgraphs, a session run inside a run).

    The workers are pinned (see pin) but the caller is not, and when it wakes from a
    sleep between runs the scheduler may place it on a worker's core, behind the
    worker spinning for the next job while the other vCPU idles. Measured on a 2-vCPU
    VM with a 0.1 s pause before each MobileNetV2 run: the caller waited 4.7 ms of a
    17.5 ms run for a core (schedstat), against 0 of 12.2 ms back to back. Pinning
    waits for the first job because the two affinity calls cost 30-60 us on that VM,
    a fifth of a small scikit-learn model's run that never uses the pool."""
    if cpus is None or getattr(_caller, "run", None) is not None:
        return None
    run = RunPin()
    _caller.run = run
    return run


def end_run(run: RunPin | None) -> None:
    if run is None:
        return
    _caller.run = None
    if run.saved is not None:
        try:
            os.sched_setaffinity(0, run.saved)
        except OSError:
            pass


def pin_caller(cpus: frozenset[int]) -> None:
    """Pin the caller to `cpus` for the rest of its open run (once per run); an
    affinity the application set that holds none of them is kept."""
    run = getattr(_caller, "run", None)
    if run is None or run.tried:
        return
    run.tried = True
    if not getattr(_caller, "warm", False) and "numba" in sys.modules:
        # numba's OpenMP layer starts a calling thread's team at that thread's first
        # parallel region, and a new thread inherits its creator's affinity: a team
        # first started inside a pinned run would share the caller's one core forever
        # (a process that runs its kernels without numba, kernels/objload, has no team)
        _caller.warm = True
        start_team(np.zeros(nb.get_num_threads(), dtype=np.int64))
    try:
        saved = os.sched_getaffinity(0)
        target = cpus & saved
        if target and target != saved:
            os.sched_setaffinity(0, target)
            run.saved = saved
    except OSError:
        pass
