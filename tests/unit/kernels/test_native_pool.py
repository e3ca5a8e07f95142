"""The native (GIL-free) job path of native/parallel.py and the sgemm it calls
(kernels/linalg/blas.py), against float64 numpy references."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from onnxexec.kernels import intrinsics
from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.linalg import blas, gemm
from onnxexec.kernels.math.activations import epilogue_reference
from onnxexec.native import affinity, parallel


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _want(x, w, b, code, alpha=0.0, beta=0.0):
    y = (x.astype(np.float64) @ w.astype(np.float64)).astype(np.float32)
    return epilogue_reference(y, b, code, alpha, beta)


@pytest.mark.parametrize(
    "m, k, n",
    [(128, 96, 200), (300, 64, 90), (1, 512, 2304), (17, 1100, 70), (64, 576, 192)],
)
@pytest.mark.parametrize("layout", ["kn", "nk_view", "strided"])
def test_linear_native_layouts(threads, m, k, n, layout) -> None:
    x = _rand(m, k)
    if layout == "kn":
        w = _rand(k, n, seed=1)
    elif layout == "nk_view":  # transB: a transposed view, as prepacked Gemm weights are
        w = _rand(n, k, seed=1).T
    else:  # row stride larger than the row: still read in place (ldb > n)
        w = _rand(k, n + 13, seed=1)[:, 5 : 5 + n]
    b = _rand(n, seed=2)
    got = gemm.linear(x, w, b, ACT["Gelu"])
    np.testing.assert_allclose(got, _want(x, w, b, ACT["Gelu"]), rtol=1e-4, atol=1e-4)
    got = gemm.linear(x.reshape(1, m, k), w)  # no epilogue; leading axes kept
    assert got.shape == (1, m, n)
    np.testing.assert_allclose(got[0], _want(x, w, None, 0), rtol=1e-4, atol=1e-4)


def test_linear_native_activation_params(threads) -> None:
    x, w, b = _rand(96, 128), _rand(128, 256, seed=1), _rand(256, seed=2)
    got = gemm.linear(x, w, b, ACT["Clip"], -0.5, 0.75)
    np.testing.assert_allclose(got, _want(x, w, b, ACT["Clip"], -0.5, 0.75), atol=1e-4)
    assert got.min() >= -0.5 and got.max() <= 0.75


def test_bounds_cover_and_align() -> None:
    for n, threads, align in [(768, 2, 16), (100, 2, 16), (5, 4, 8), (3000, 3, 16)]:
        b = gemm._bounds(n, threads, align)
        assert b[0] == 0 and b[-1] == n and np.all(np.diff(b) > 0)
        assert np.all(b[1:-1] % align == 0) and len(b) - 1 <= parallel.MAX_SPANS


def test_python_and_native_jobs_interleave(threads) -> None:
    """Python spans and native products alternate on one pool without losing items."""
    x, w = _rand(64, 256), _rand(256, 384, seed=1)
    want = _want(x, w, None, 0)
    for _ in range(20):
        seen = np.zeros(57, dtype=np.int64)

        def mark(a: int, b: int, seen=seen) -> None:
            seen[a:b] += 1

        parallel.parallel_for(mark, 57)
        assert np.all(seen == 1)
        np.testing.assert_allclose(gemm.linear(x, w), want, rtol=1e-4, atol=1e-4)


def test_concurrent_callers_share_the_pool() -> None:
    """Two threads running products at once: one gets the pool, the other runs serially."""
    old = parallel.num_threads()
    parallel.set_num_threads(2)
    try:
        x, w = _rand(128, 256), _rand(256, 512, seed=1)
        want = _want(x, w, None, 0)
        errors: list[BaseException] = []

        def loop() -> None:
            try:
                for _ in range(30):
                    np.testing.assert_allclose(gemm.linear(x, w), want, rtol=1e-4, atol=1e-4)
            except BaseException as e:
                errors.append(e)

        ts = [threading.Thread(target=loop) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
    finally:
        parallel.set_num_threads(old)


@pytest.mark.skipif(not intrinsics.SYSCALL, reason="no futex syscall on this platform")
def test_idle_workers_sleep_on_the_futex_and_wake_for_jobs() -> None:
    """Idle workers sleep in compiled code (the SLEEPERS count); a posted native or
    Python job wakes them and still gets every item done; closing the pool wakes
    and ends them."""
    old = parallel.num_threads()
    parallel.set_num_threads(3)
    try:
        pool = parallel._pool
        x, w = _rand(96, 256), _rand(256, 640, seed=1)
        want = _want(x, w, None, 0)
        for _ in range(3):
            np.testing.assert_allclose(gemm.linear(x, w), want, rtol=1e-4, atol=1e-4)
            for _ in range(200):  # spinning stops after ~0.2 ms
                if pool.ctrl[parallel.SLEEPERS] == len(pool.workers):
                    break
                threading.Event().wait(0.005)
            assert pool.ctrl[parallel.SLEEPERS] == len(pool.workers)
            seen = np.zeros(40, dtype=np.int64)

            def mark(a: int, b: int, seen=seen) -> None:
                seen[a:b] += 1

            parallel.parallel_for(mark, 40)
            assert np.all(seen == 1)
        workers = pool.workers
        parallel.set_num_threads(1)
        for t in workers:
            t.join(timeout=5)
            assert not t.is_alive()
    finally:
        parallel.set_num_threads(old)


@pytest.mark.skipif(not blas.SGEMM, reason="numpy without a 64-bit-int OpenBLAS")
def test_blas_sgemm_found() -> None:
    assert blas.SGEMM > 0


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux thread affinity and at least 2 CPUs",
)
def test_caller_kept_off_the_workers_cores_during_a_run() -> None:
    """Within an open run the caller's first pool job moves it to the CPUs no worker
    is pinned to, and end_run restores its affinity; a run that posts no job never
    changes it; nested runs leave the outer one alone; workers started while the
    caller is pinned still get their own core (the pool read the process's CPUs
    when it was made)."""
    from onnxexec.runtime import threads

    old = parallel.num_threads()
    before = os.sched_getaffinity(0)
    cpus = sorted(before)
    parallel.set_num_threads(2)
    try:
        pool = parallel._pool
        assert not pool.started
        idle = threads.begin_run()
        threads.end_run(idle)  # no job: never pinned
        assert idle is not None and idle.saved is None and os.sched_getaffinity(0) == before
        run = threads.begin_run()
        assert threads.begin_run() is None  # nested: the outer run owns the pinning
        assert os.sched_getaffinity(0) == before  # nothing until the first job
        x, w = _rand(64, 128), _rand(128, 256, seed=2)
        np.testing.assert_allclose(gemm.linear(x, w), _want(x, w, None, 0), rtol=1e-4, atol=1e-4)
        assert pool.started and os.sched_getaffinity(0) == set(cpus[:-1])
        (worker,) = pool.workers
        for _ in range(100):  # the worker pins itself first thing in its loop
            if os.sched_getaffinity(worker.native_id) == {cpus[-1]}:
                break
            threading.Event().wait(0.01)
        assert os.sched_getaffinity(worker.native_id) == {cpus[-1]}
        threads.end_run(run)
        assert os.sched_getaffinity(0) == before
    finally:
        parallel.set_num_threads(old)
        os.sched_setaffinity(0, before)


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux thread affinity and at least 2 CPUs",
)
def test_parallel_regions_inside_a_pinned_run_keep_every_core() -> None:
    """A thread's first numba parallel region starts its OpenMP team; the pool starts
    it before pinning the caller, so no team thread inherits the caller's one core."""
    from onnxexec.runtime import threads

    old = parallel.num_threads()
    cpus = sorted(os.sched_getaffinity(0))
    parallel.set_num_threads(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            run = threads.begin_run()
            x, w = _rand(64, 128), _rand(128, 256, seed=3)
            gemm.linear(x, w)  # a pool job: the caller is pinned from here on
            assert run is not None and run.saved is not None
            out = np.zeros(64, dtype=np.int64)
            affinity.start_team(out)  # a parallel region inside the pinned run
            assert np.array_equal(out, np.arange(64))
            threads.end_run(run)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
        assert not errors
        pinned = set(cpus[:-1])
        for tid in os.listdir("/proc/self/task"):
            try:
                assert os.sched_getaffinity(int(tid)) != pinned, f"thread {tid} kept the pin"
            except ProcessLookupError:
                pass
    finally:
        parallel.set_num_threads(old)


def test_every_native_kind_has_a_span_kernel_behind_one_address() -> None:
    """kernels/span_fns.py: each native job kind of parallel.py maps to a C-callable
    span kernel, compiled once (the same address on every lookup)."""
    from onnxexec.kernels import span_fns

    kinds = {v for k, v in vars(parallel).items() if k.startswith("KIND_") and k != "KIND_PY"}
    assert kinds == set(span_fns.WRAPPERS)
    for kind in sorted(kinds):
        a = span_fns.address(kind)
        assert a != 0 and span_fns.address(kind) == a
    assert span_fns.ARG_SLOTS == parallel.BOUNDS - parallel.ARGS
    assert parallel.SPANFN not in range(parallel.ARGS, parallel.BOUNDS)
