"""Thread-count control for numpy's BLAS and numba's parallel kernels."""

from __future__ import annotations

import os

# numba's OpenMP layer spin-waits between parallel regions by default; with more busy
# threads than cores (our own pool, BLAS, other processes) a 2-thread prange kernel ran
# 10-20x slower than on one thread. Passive waiting must be chosen before libgomp loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba
from threadpoolctl import threadpool_limits

from onnxexec.kernels import parallel

_limiter: threadpool_limits | None = None


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def set_threads(n: int, blas_threads: int | None = None) -> int:
    """Use `n` threads for BLAS and numba (0 = all cores). Returns the count in effect.

    Process-wide, like onnxruntime's global thread pools when sessions share one.
    `blas_threads` overrides the BLAS count: the fused kernels (kernels/parallel.py)
    split work across their own `n` threads and want single-threaded BLAS inside.
    """
    global _limiter
    if n < 0:
        raise ValueError(f"thread count must be >= 0, got {n}")
    n = n or default_threads()
    n = min(n, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(n)
    parallel.set_num_threads(n)
    _limiter = threadpool_limits(limits=n if blas_threads is None else blas_threads)
    return n
