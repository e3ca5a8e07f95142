"""Posting a native pool job, and replaying a node's one job without recomputing it.

A conv node of a static-shape model does the same thing every run: the same kernel
kind, the same span bounds, the same argument slots except the addresses of its
input, output and residual. Working those out again (geometry, path rules, weight
views, bounds, a dozen `.ctypes` reads at ~1 us each on this kind of VM) cost 30-48 us
of Python a node, against 50-120 us for the job itself on MobileNetV2's 7x7 / 14x14
layers. So a handler can run its first call under `recording()`: every launch site
posts its job through `run_job`, and a site whose job is the node's whole work (its
other pointers are constants the record keeps alive) records it. When a call ran
exactly one such job, `Replay.of` finds which slots hold the input / output / residual
addresses and later calls only write those three and post the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.span_fns import address as span_address
from onnxexec.native.affinity import pin_caller
from onnxexec.native.parallel import (
    ARGS,
    SPANFN,
    TIMEOUT,
    Pool,
    join_workers,
    native_pool,
    num_threads,
    publish,
    recorded,
    serve,
)


class Job:
    """One posted native job: its kind, argument slots, float slots and span bounds,
    plus the arrays its pointer slots address (kept alive while the record lives) and
    its `prep`, if any: what refills the job's own copy of the input before a replay
    (a KxK conv's phase planes), the job then reading that copy, not the input."""

    __slots__ = ("alpha", "args", "beta", "bounds", "keep", "kind", "prep")

    def __init__(
        self,
        kind: int,
        args: np.ndarray,
        alpha: float,
        beta: float,
        bounds: np.ndarray,
        keep: tuple[Any, ...],
        prep: Callable[[np.ndarray], Any] | None = None,
    ) -> None:
        self.kind, self.args, self.alpha, self.beta = kind, args, alpha, beta
        self.bounds, self.keep, self.prep = bounds, keep, prep


def run_job(
    pool: Pool,
    kind: int,
    args: Sequence[int] | np.ndarray,
    alpha: float,
    beta: float,
    bounds: np.ndarray,
    keep: tuple[Any, ...] | None = None,
    prep: Callable[[np.ndarray], Any] | None = None,
) -> None:
    """Write a job's slots to the locked `pool` and run it. `keep` (the arrays its
    pointer slots address) says the job is all of its node's work on the node's own
    arrays; None (a temporary input copy, more work around the job) leaves the
    recorded job unreplayable, like every job posted without run_job. `prep(x)`
    (see Job) redoes the job's input copy from a replayed call's input x."""
    n = len(args)
    pool.ctrl[ARGS : ARGS + n] = args
    pool.fctrl[0], pool.fctrl[1] = alpha, beta
    pool.run_native(kind, bounds)
    jobs = getattr(recorded, "jobs", None)
    if jobs is not None and keep is not None:
        a = np.array(args, dtype=np.int64)
        jobs[-1] = Job(kind, a, alpha, beta, bounds.copy(), keep, prep)


class recording:
    """`with recording() as jobs:` collects the native jobs this thread posts (None
    for each that can't be replayed)."""

    def __enter__(self) -> list[Job | None]:
        self.prev = getattr(recorded, "jobs", None)
        recorded.jobs = []
        return recorded.jobs

    def __exit__(self, *exc: object) -> None:
        jobs = recorded.jobs
        recorded.jobs = self.prev
        if self.prev is not None:  # an enclosing recording sees these jobs too
            self.prev.extend(jobs)


class Replay:
    """A node's one native job with the input / output / residual address slots found;
    `run` posts it again for new arrays of the same shapes (and returns False when the
    pool is busy or the thread count changed: the caller then takes its full path)."""

    __slots__ = (
        "args", "bounds", "fargs", "fns", "hdr", "keep", "out_shape", "prep", "slots", "threads",
    )  # fmt: skip

    def __init__(self, job: Job, slots: tuple[int, int, int], out_shape: tuple[int, ...]):
        self.slots, self.out_shape = slots, out_shape
        self.args, self.bounds = job.args, job.bounds
        self.fargs = np.array([job.alpha, job.beta], dtype=np.float64)
        self.hdr = np.zeros(6, dtype=np.int64)
        self.hdr[HKIND], self.hdr[HFN] = job.kind, span_address(job.kind)
        self.hdr[HX : HZ + 1] = slots
        self.threads = num_threads()
        self.keep = job.keep  # the arrays its constant address slots point into
        self.prep = job.prep
        # _replay's linked overload by the flag bits of x and z (the other arguments'
        # types never change; out is always a new C-contiguous array)
        self.fns: dict[tuple[int, int], Any] = {}

    @staticmethod
    def of(
        jobs: list[Job | None], x: np.ndarray, out: np.ndarray, z: np.ndarray | None
    ) -> Replay | None:
        """The replay of a recorded call that ran one replayable job whose slots hold
        x's (unless a prep copies x), out's and z's addresses exactly once each."""
        if len(jobs) != 1 or jobs[0] is None:
            return None
        job = jobs[0]
        ptrs = [x.ctypes.data, out.ctypes.data, -1 if z is None else z.ctypes.data]
        if len(set(ptrs)) != 3:  # an input also read as the residual: ambiguous
            return None
        if job.prep is not None:
            if x.ctypes.data in job.args:
                return None
            ptrs[0] = -1
        found = []
        for p in ptrs:
            hits = np.flatnonzero(job.args == p) if p >= 0 else np.array([-1])
            if hits.shape[0] != 1:
                return None
            found.append(int(hits[0]))
        return Replay(job, (found[0], found[1], found[2]), out.shape)

    def run(self, x: np.ndarray, out: np.ndarray, z: np.ndarray | None) -> bool:
        if num_threads() != self.threads:
            return False
        pool = native_pool()
        if pool is None:
            return False
        try:
            if self.prep is not None:  # under the pool's lock: its copy is shared
                self.prep(x)
            self._post(pool, x, out, _NO_Z if z is None else z)
        finally:
            pool.busy.release()
        return True

    def _post(self, pool: Pool, x: np.ndarray, out: np.ndarray, z: np.ndarray) -> None:
        """pool.run_native for this job: slots, addresses, post and join in one
        compiled call (_replay), ~5 us less Python a job than writing the slots and
        calling run_native, which it takes only for workers on the condition variable
        (no futex)."""
        hdr, args = self.hdr, self.args
        if pool.sleeping:
            pool.ctrl[ARGS : ARGS + args.shape[0]] = args
            for slot, a in ((hdr[HX], x), (hdr[HOUT], out), (hdr[HZ], z)):
                if slot >= 0:
                    pool.ctrl[ARGS + slot] = a.ctypes.data
            pool.fctrl[:2] = self.fargs
            pool.run_native(int(hdr[HKIND]), self.bounds)
            return
        if pool.caller_cpus is not None:
            pin_caller(pool.caller_cpus)
        pool._adapt()
        pool.jobs += 1
        hdr[HJOB] = pool.jobs
        ctrl, fctrl = pool.ctrl, pool.fctrl
        call = (ctrl, fctrl, hdr, args, self.fargs, self.bounds, x, out, z, TIMEOUT)
        key = (x.flags.num, z.flags.num)
        fn = self.fns.get(key)
        if fn is None:
            linked = getattr(_replay, "linked", None)  # a LazyKernel (not numba's own)
            fn = None if linked is None else linked(call)
            if fn is not None:
                self.fns[key] = fn
            else:
                fn = _replay
        if not fn(*call):
            while not serve(ctrl, fctrl, False, TIMEOUT):
                time.sleep(2e-5)  # a worker is still running a span: let it have the core
        jobs = getattr(recorded, "jobs", None)
        if jobs is not None:  # a replayed job is not replayable itself
            jobs.append(None)


# _replay's header slots: job number, kind, span kernel address, and the argument
# slots that take the input / output / residual addresses (-1: none)
HJOB, HKIND, HFN, HX, HOUT, HZ = range(6)


@nb.njit(nogil=True, cache=True)
def _replay(ctrl, fctrl, hdr, args, fargs, bounds, x, out, z, timeout):
    """Post and join a recorded native job in one call: its slots `args` with x's
    (unless it reads a copy), out's and z's addresses written in, its floats `fargs`."""
    for i in range(args.shape[0]):
        ctrl[ARGS + i] = args[i]
    if hdr[HX] >= 0:
        ctrl[ARGS + hdr[HX]] = x.ctypes.data
    ctrl[ARGS + hdr[HOUT]] = out.ctypes.data
    if hdr[HZ] >= 0:
        ctrl[ARGS + hdr[HZ]] = z.ctypes.data
    fctrl[0], fctrl[1] = fargs[0], fargs[1]
    ctrl[SPANFN] = hdr[HFN]
    publish(ctrl, hdr[HJOB], hdr[HKIND], bounds)
    return join_workers(ctrl, fctrl, timeout)


_NO_Z = np.zeros(1, dtype=np.float32)
