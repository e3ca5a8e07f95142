"""Threaded matrix products with a fused bias + activation epilogue.

`linear` is x (..., K) @ w (K, N) (+ bias) (-> activation) for a constant weight: the
output is split into blocks of columns (or rows, when x is the taller operand), each
block one single-threaded BLAS sgemm writing straight into its slice of the output,
followed by the epilogue on that slice while it is in cache. Splitting along N
duplicates the packing of x (M x K) across blocks and along M that of w (K x N), so
the split runs along the larger of M and N.
The blocks run as a native job of native/parallel.py: the pool's threads call
OpenBLAS's cblas_sgemm from numba code (kernels/linalg/blas.py) without taking the GIL.

`batched` is a broadcasting np.matmul for two run-time operands (attention's
Q @ K^T, P @ V), split across the leading batch axis.

Results equal np.matmul's up to BLAS summation order (identical in practice: every
output element is still one dot product computed by the same sgemm micro-kernel).
"""

from __future__ import annotations

import math
import os

import numpy as np

from onnxexec.kernels import bounds, tuning
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.linalg import blas, sgemm_packed
from onnxexec.kernels.math.activations import epilogue
from onnxexec.native.parallel import (
    ARGS,
    KIND_GEMM,
    KIND_PACKED,
    MAX_SPANS,
    native_pool,
    num_threads,
    parallel_for,
)

_MIN_WORK = tuning.GEMM_PARALLEL_MACS  # multiply-adds below which one thread is faster than two
_MIN_NATIVE = tuning.GEMM_NATIVE_PARALLEL_MACS
_COL_BLOCK = 16  # column granularity of the N split (keeps sgemm panels aligned)
# ONNXEXEC_NATIVE_POOL=0 runs products as Python jobs on the pool (for A/B timing)
_USE_NATIVE = os.environ.get("ONNXEXEC_NATIVE_POOL", "1") != "0"


def linear(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    act: int = 0,
    alpha: float = 0.0,
    beta: float = 0.0,
    act_cols: tuple[int, int] | None = None,
) -> np.ndarray:
    """act(x @ w + bias): x (..., K) f32, w (K, N) f32 (any strides), bias (N,) -> (..., N).

    `act_cols` = (lo, hi) applies the activation to output columns [lo, hi) only (the
    bias still goes everywhere); default all N.

    Preconditions (checked, ValueError otherwise): w 2-D, x's last axis K, bias None or
    N values, 0 <= lo <= hi <= N. Only float32 operands go to the native pool."""
    bounds.rank("matmul", "weight", w, 2)
    k, n = w.shape
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(f"matmul: x {list(x.shape)} and weight {list(w.shape)} do not multiply")
    lo, hi = _act_cols(act_cols, bias, n)
    lead = x.shape[:-1]
    x2 = x.reshape(math.prod(lead), k)  # not -1: K or the batch may be 0
    m = x2.shape[0]
    out = np.empty((m, n), dtype=np.float32)
    threads = num_threads()
    if threads == 1 or m * n * k < _MIN_NATIVE or m == 0 or n == 0:
        np.matmul(x2, w, out=out)
        _finish(out, 0, n, bias, act, alpha, beta, lo, hi)
    elif _native(x2, w, out, bias, act, alpha, beta, threads, lo, hi):
        pass
    elif m >= n:

        def rows(a: int, b: int) -> None:
            np.matmul(x2[a:b], w, out=out[a:b])
            _finish(out[a:b], 0, n, bias, act, alpha, beta, lo, hi)

        parallel_for(rows, m, min_chunk=8)
    else:
        blocks = -(-n // _COL_BLOCK)

        def cols(a: int, b: int) -> None:
            n0, n1 = a * _COL_BLOCK, min(b * _COL_BLOCK, n)
            np.matmul(x2, w[:, n0:n1], out=out[:, n0:n1])
            _finish(out, n0, n1, bias, act, alpha, beta, lo, hi)

        parallel_for(cols, blocks)
    return out.reshape(*lead, n)


def _act_cols(act_cols: tuple[int, int] | None, bias: np.ndarray | None, n: int) -> tuple[int, int]:
    """The checked activation column range; bias None or n values (read by address)."""
    bounds.length("matmul", "bias", bias, n)
    if act_cols is None:
        return 0, n
    lo, hi = bounds.ints("matmul", "activation columns", act_cols, 2, 0)
    if not lo <= hi <= n:
        raise bounds.fail("matmul", f"activation columns {[lo, hi]} outside [0, {n}]")
    return lo, hi


def _finish(out, n0, n1, bias, act, alpha, beta, lo, hi) -> None:
    """The epilogue on columns [n0, n1) of out: bias everywhere, the activation on the
    part inside [lo, hi)."""
    a, b = max(n0, min(lo, n1)), max(n0, min(hi, n1))
    if act == Activation.NONE or (a, b) == (n0, n1):
        epilogue(out, n0, n1, bias, act if b > a else Activation.NONE, alpha, beta)
        return
    for c0, c1, code in ((n0, a, 0), (a, b, act), (b, n1, 0)):
        if c1 > c0:
            epilogue(out, c0, c1, bias, code, alpha, beta)


def _bounds(n_items: int, threads: int, align: int) -> np.ndarray:
    """Boundaries of 2 spans per thread, equal and multiples of `align`. Each span
    repacks the other operand, so fewer would be cheaper; two per thread bound what a
    thread that starts late (or is preempted on a busy machine) leaves the others to
    wait for (one span per thread measured 5-10% slower on a loaded machine)."""
    units = -(-n_items // align)
    parts = min(units, 2 * threads, MAX_SPANS)
    cuts = [units * i // parts * align for i in range(parts)]
    return np.array([*cuts, n_items], dtype=np.int64)


def _ld(a: np.ndarray, inner: int) -> int | None:
    """Leading dimension (in elements) of a row-major 2-D view with unit inner stride."""
    s0, s1 = a.strides
    if s1 != 4 or s0 % 4 or s0 // 4 < inner or not a.flags.aligned:
        return None
    return s0 // 4


def _native(x2, w, out, bias, act, alpha, beta, threads: int, lo: int = 0, hi: int = -1) -> bool:
    """act(x2 @ w + bias) into out on the native pool (no GIL in the workers); False
    when the pool or sgemm is unavailable or an operand needs a copy."""
    m, k = x2.shape
    n = w.shape[1]
    if not (_USE_NATIVE and blas.SGEMM) or k == 0:
        return False
    if x2.dtype != np.float32 or w.dtype != np.float32:  # read as float32 by address
        return False
    lda = _ld(x2, k)
    ldb, tb = _ld(w, n), blas.NO_TRANS
    if ldb is None:
        ldb, tb = _ld(w.T, k), blas.TRANS
    if lda is None or ldb is None:
        return False
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
    pool = native_pool()
    if pool is None:
        return False
    try:
        axis = 1 if n >= m else 0
        spans = _bounds(n if axis else m, threads, _COL_BLOCK if axis else 8)
        pool.ctrl[ARGS : ARGS + blas.G_ARGS] = (
            blas.SGEMM,
            tb,
            m,
            n,
            k,
            x2.ctypes.data,
            lda,
            w.ctypes.data,
            ldb,
            out.ctypes.data,
            n,
            0 if bias is None else bias.ctypes.data,
            act,
            axis,
            lo,
            n if hi < 0 else hi,
            0,
            0,
        )
        pool.fctrl[0], pool.fctrl[1] = alpha, beta
        pool.run_native(KIND_GEMM, spans)
    finally:
        pool.busy.release()
    return True


def linear_packed(
    x: np.ndarray,
    wp: np.ndarray,
    n: int,
    bias: np.ndarray | None = None,
    act: int = 0,
    alpha: float = 0.0,
    beta: float = 0.0,
    act_cols: tuple[int, int] | None = None,
) -> np.ndarray:
    """`linear` for a weight packed by sgemm_packed.pack: x (..., K) f32, wp (P, K, nr)
    holding W (K, n) -> act(x @ W + bias) (..., n). Threads split the panels.

    Preconditions (checked, ValueError otherwise): wp a C-contiguous float32 (P, K, nr)
    with nr a panel width this host runs and (P - 1) * nr < n <= P * nr; x's last axis
    K (x is converted to float32); bias None or n values; 0 <= lo <= hi <= n."""
    bounds.rank("matmul", "packed weight", wp, 3)
    p, k, nr = wp.shape
    if (
        x.ndim < 1
        or x.shape[-1] != k
        or nr not in sgemm_packed.WIDTHS
        or not (p - 1) * nr < n <= p * nr
    ):
        raise ValueError(f"matmul: x {list(x.shape)} and packed weight {list(wp.shape)} (N={n})")
    if wp.dtype != np.float32 or not wp.flags.c_contiguous:
        raise bounds.fail("matmul", "the packed weight must be C-contiguous float32")
    lo, hi = _act_cols(act_cols, bias, n)
    lead = x.shape[:-1]
    x2 = x.reshape(math.prod(lead), k).astype(np.float32, copy=False)
    if x2.strides[-1] != 4 or not x2.flags.aligned or (x2.shape[0] > 1 and x2.strides[0] % 4):
        x2 = np.ascontiguousarray(x2)
    m = x2.shape[0]
    lda = x2.strides[0] // 4 if m > 1 else k
    out = np.empty((m, n), dtype=np.float32)
    if m == 0 or n == 0:
        return out.reshape(*lead, n)
    if k == 0:
        out.fill(0.0)
        epilogue(out, 0, n, bias, act, alpha, beta)
        return out.reshape(*lead, n)
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
    threads = num_threads()
    pool = native_pool() if threads > 1 and m * n * k >= _MIN_NATIVE and p > 1 else None
    if pool is None:
        sgemm_packed.packed_span(
            x2.ctypes.data, lda, m, k, wp.ctypes.data, n, out.ctypes.data, n, 0, p, nr
        )
        _finish(out, 0, n, bias, act, alpha, beta, lo, hi)
        return out.reshape(*lead, n)
    try:
        # Without per-call packing a span costs only its panels: finer spans balance a
        # thread that starts late (or is preempted) at no extra cost.
        parts = min(p, 4 * threads, MAX_SPANS)
        spans = np.array([p * i // parts for i in range(parts + 1)], dtype=np.int64)
        pool.ctrl[ARGS : ARGS + blas.G_ARGS] = (
            0,
            0,
            m,
            n,
            k,
            x2.ctypes.data,
            lda,
            wp.ctypes.data,
            nr,
            out.ctypes.data,
            n,
            0 if bias is None else bias.ctypes.data,
            act,
            1,
            lo,
            hi,
            0,
            0,
        )
        pool.fctrl[0], pool.fctrl[1] = alpha, beta
        pool.run_native(KIND_PACKED, spans)
    finally:
        pool.busy.release()
    return out.reshape(*lead, n)


def batched(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul(a, b) for float32 operands of rank >= 3, split over the batch axes."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = np.empty((*batch, a.shape[-2], b.shape[-1]), dtype=np.result_type(a, b))
    work = out.size * a.shape[-1]
    if num_threads() == 1 or work < _MIN_WORK or not batch:
        return np.matmul(a, b, out=out)
    ab = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    bb = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    axis = next((i for i, d in enumerate(batch) if d > 1), 0)
    idx = (slice(None),) * axis

    def part(i0: int, i1: int) -> None:
        s = (*idx, slice(i0, i1))
        np.matmul(ab[s], bb[s], out=out[s])

    parallel_for(part, batch[axis])
    return out
