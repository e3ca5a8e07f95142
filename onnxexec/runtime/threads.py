"""Thread-count control for numpy's BLAS and numba's parallel kernels."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from onnxexec.kernels import objload, when_imported

# OWN_ENV names what `configure_environment` set, so a child process that must not
# inherit our tuning (the llama.cpp anchor in benchmarks, which links libgomp too) can
# drop it.
OWN_ENV: dict[str, str] = {}
if TYPE_CHECKING:
    from threadpoolctl import threadpool_limits
_limiter: threadpool_limits | None = None
_blas_count = -1
# numba is imported by the first kernel module a model loads, not here: a model whose
# ops are all numpy (small scikit-learn pipelines) then never pays its ~60 MB. The count
# set before that is applied by apply_pending once numba is in (sessions call it after
# planning and before each run).
_pending = 0


def configure_environment() -> None:
    """Set the environment variables the thread layers read when they load, unless the
    user set them: called where threads are configured (set_threads, i.e. the first
    session or LLM), never at import.

    GOMP_SPINCOUNT=10000: numba's OpenMP layer (libgomp) decides how its idle workers
    wait when it loads, from the environment. Its default spins ~300k iterations (a few
    ms) after every parallel region: with BLAS or other processes also busy that
    starved the thread doing real work (a 2-thread prange kernel ran 10-20x slower than
    on one thread). Pure passive waiting instead costs a futex wake-up per region, which
    cut a GGUF decode step (60 regions) to 0.6x. A short spin (~0.1 ms at libgomp's
    ~100k spins per ms) catches back-to-back regions and then sleeps. libgomp reads it
    once, when numba's threading layer loads (its first parallel kernel, after this).
    """
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        OWN_ENV["GOMP_SPINCOUNT"] = os.environ["GOMP_SPINCOUNT"] = "10000"


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def set_threads(n: int, blas_threads: int | None = None) -> int:
    """Use `n` threads for BLAS and numba (0 = all cores). Returns the count in effect.

    Process-wide, like onnxruntime's global thread pools when sessions share one.
    `blas_threads` overrides the BLAS count: the fused kernels (native/parallel.py)
    split work across their own `n` threads and want single-threaded BLAS inside.
    """
    global _limiter, _blas_count, _pending
    if n < 0:
        raise ValueError(f"thread count must be >= 0, got {n}")
    configure_environment()
    n = n or default_threads()
    if "numba" in sys.modules:
        n = _set_numba_threads(n)
        _pending = 0
    else:
        n = min(n, _numba_cap())
        _pending = n
        objload.set_thread_hint(n)  # kernels that decide on threads before numba loads
        _size_pool(n)
    blas = n if blas_threads is None else blas_threads
    # threadpool_limits rescans the loaded libraries (~1.5 ms, most of a small
    # model's session creation): skip it when the previous call set the same count.
    if _limiter is None or _blas_count != blas:
        # imported here: threadpoolctl's import sets KMP_DUPLICATE_LIB_OK in os.environ
        from threadpoolctl import threadpool_limits

        _limiter = threadpool_limits(limits=blas)
        _blas_count = blas
    return n


def _set_numba_threads(n: int) -> int:
    import numba

    from onnxexec.native import parallel

    # numba.config sets its NUMBA_* attributes at import (no stub declares them)
    n = min(n, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(n)
    parallel.set_num_threads(n)
    return n


def _numba_cap() -> int:
    """numba's NUMBA_NUM_THREADS (its default: the CPUs this process may use), read
    without importing numba."""
    try:
        return max(1, int(os.environ.get("NUMBA_NUM_THREADS", "")))
    except ValueError:
        return default_threads()


def _size_pool(n: int) -> None:
    # the kernel pool needs no numba (kernels/objload): size it once it is imported
    par = sys.modules.get("onnxexec.native.parallel")
    if par is not None:
        par.set_num_threads(n)


def apply_pending() -> None:
    """Give numba and the kernel pool the count set_threads recorded before numba was
    imported (the pool as soon as it exists; numba once it is imported)."""
    global _pending
    if not _pending:
        return
    if "numba" in sys.modules:
        _set_numba_threads(_pending)
        _pending = 0
    else:
        _size_pool(_pending)


def _numba_imported(numba: Any) -> None:
    """kernels/objload runs cached kernels without numba, so numba may be imported only
    mid-run (a kernel with no record) or by the caller: its count is set right then.
    Only numba's: this runs inside whichever import pulled numba in, where importing
    the kernel pool could be circular; `_pending` stays, so apply_pending (before the
    next run) sizes the pool."""
    if _pending:
        numba.set_num_threads(min(_pending, numba.config.NUMBA_NUM_THREADS))


when_imported("numba", _numba_imported)


def begin_run() -> Any:
    """native/parallel.py's begin_run once its pool exists (a no-op before: a model
    that loads no kernel module has no pool, and importing it here would pull in
    numba). Pass the result to end_run."""
    par = sys.modules.get("onnxexec.native.parallel")
    return par.begin_run() if par is not None else None


def end_run(run: Any) -> None:
    if run is not None:
        sys.modules["onnxexec.native.affinity"].end_run(run)
