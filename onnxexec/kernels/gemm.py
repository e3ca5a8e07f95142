"""Threaded matrix products with a fused bias + activation epilogue.

`linear` is x (..., K) @ w (K, N) (+ bias) (-> activation) for a constant weight: the
output is split into one block of columns (or rows, when x is the taller operand)
per thread, each block one single-threaded BLAS sgemm writing straight into its
slice of the output, followed by the epilogue on that slice while it is in cache.
Splitting along N duplicates the packing of x (M x K) across threads and along M
that of w (K x N), so the split runs along the larger of M and N.

`batched` is a broadcasting np.matmul for two run-time operands (attention's
Q @ K^T, P @ V), split across the leading batch axis.

Results equal np.matmul's up to BLAS summation order (identical in practice: every
output element is still one dot product computed by the same sgemm micro-kernel).
"""

from __future__ import annotations

import math

import numpy as np

from onnxexec.kernels.activations import epilogue
from onnxexec.kernels.parallel import num_threads, parallel_for

_MIN_WORK = 1 << 18  # multiply-adds below which one thread is faster than two
_COL_BLOCK = 32  # column granularity of the N split (keeps sgemm panels aligned)


def linear(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    act: int = 0,
    alpha: float = 0.0,
    beta: float = 0.0,
) -> np.ndarray:
    """act(x @ w + bias): x (..., K) f32, w (K, N) f32 (any strides), bias (N,) -> (..., N)."""
    k, n = w.shape
    if x.shape[-1] != k:
        raise ValueError(f"matmul: x {list(x.shape)} and weight {list(w.shape)} do not multiply")
    lead = x.shape[:-1]
    x2 = x.reshape(math.prod(lead), k)  # not -1: K or the batch may be 0
    m = x2.shape[0]
    out = np.empty((m, n), dtype=np.float32)
    threads = num_threads()
    if threads == 1 or m * n * k < _MIN_WORK or m == 0 or n == 0:
        np.matmul(x2, w, out=out)
        epilogue(out, 0, n, bias, act, alpha, beta)
    elif m >= n:

        def rows(a: int, b: int) -> None:
            np.matmul(x2[a:b], w, out=out[a:b])
            epilogue(out[a:b], 0, n, bias, act, alpha, beta)

        parallel_for(rows, m, min_chunk=8)
    else:
        blocks = -(-n // _COL_BLOCK)

        def cols(a: int, b: int) -> None:
            n0, n1 = a * _COL_BLOCK, min(b * _COL_BLOCK, n)
            np.matmul(x2, w[:, n0:n1], out=out[:, n0:n1])
            epilogue(out, n0, n1, bias, act, alpha, beta)

        parallel_for(cols, blocks)
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
