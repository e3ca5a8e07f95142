"""The row-interleaved ("lanes") weight layout shared by the fast qmatmul kernels.

A weight W (N, K) is cut into groups of LANES consecutive rows; inside a group the
bytes of the same block position of all LANES rows sit next to each other, e.g.
Q4 nibbles as qs[group, block, byte, lane]. A kernel's innermost loop then runs over
lanes (= output rows) with unit stride and no reduction, which numba's loop
vectorizer turns into plain SIMD code without fastmath; each output row still sums
its blocks in order, so results do not depend on the SIMD width.

`twins` compiles one kernel body twice: with parallel=True for large problems and
serially for small ones, where waking the thread pool costs more than the work.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Final

import numba as nb
import numpy as np

from onnxexec.kernels import tuning

LANES: Final = 64  # rows per group: 4 AVX2 registers of int16 lanes per vector op
PAR_MIN_MACS: Final = tuning.LANES_PAR_MIN_MACS  # below this many multiply-adds run single-threaded
PAR_CHUNKS: Final = 16  # prange iterations (groups of groups) of a parallel kernel


def to_lanes(a: np.ndarray, lanes: int = LANES) -> np.ndarray:
    """(N, ...) -> (ceil(N/lanes), ..., lanes), zero-padded rows, C-contiguous."""
    n = a.shape[0]
    ng = -(-n // lanes)
    if ng * lanes != n:
        pad = np.zeros((ng * lanes - n, *a.shape[1:]), dtype=a.dtype)
        a = np.concatenate([a, pad])
    a = a.reshape(ng, lanes, *a.shape[1:])
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def twins(fn: Callable[..., Any], **opts: Any) -> tuple[Any, Any]:
    """(parallel, serial) numba dispatchers of one kernel body (prange is range serially).

    The serial copy gets its own qualified name so numba's on-disk cache keeps the two
    apart.
    """
    serial_fn = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__ + "_serial", fn.__defaults__, fn.__closure__
    )
    serial_fn.__qualname__ = fn.__qualname__ + "_serial"
    serial_fn.__doc__ = fn.__doc__
    par = nb.njit(parallel=True, cache=True, nogil=True, **opts)(fn)
    ser = nb.njit(cache=True, nogil=True, **opts)(serial_fn)
    return par, ser


_MAY_PARALLEL = nb.config.NUMBA_NUM_THREADS > 1


def pick(pair: tuple[Any, Any], macs: int) -> tuple[Any, int]:
    """(kernel, chunk count): the parallel twin when the work is worth waking the
    thread pool, else the serial one with a single chunk.

    numba.get_num_threads() costs a microsecond per call, too much per decode matmul,
    so only the static maximum is consulted: after set_num_threads(1) the parallel
    twin runs its chunks on one thread.
    """
    if macs >= PAR_MIN_MACS and _MAY_PARALLEL:
        return pair[0], PAR_CHUNKS
    return pair[1], 1
