"""Row reductions (max, sum, centred sum of squares) that vectorize.

A plain `acc += x[j]` loop is one dependent chain of scalar adds: LLVM may not reorder
float additions, so it runs at one add per add-latency (~4 cycles), 5-9x slower than
the same loop compiled with reassociation (128 rows of 768 floats: 29 us for 16
hand-kept partial sums, 6.6 us with reassociation). The sums are therefore compiled
with fastmath "reassoc" only (no nnan / ninf: NaN and inf still propagate) as functions
of their own, not numba-inlined, so the flag stays on their instructions alone. They
accumulate in float64; the order of the additions follows the vector width LLVM picks
for this CPU, so a result can differ in the last float64 bits between machines, never
between runs.

A max loop (`if v > m: m = v`) does not vectorize even with fastmath: LLVM wants the
function-level no-NaNs attribute numba doesn't set. row_max keeps LANES partial maxima
instead (element j to partial j % LANES; the inner loop over the partials is
elementwise, which vectorizes as it is), combined in a fixed order at the end; a
(LANES,) float32 scratch is passed in so no row allocates.
"""

from __future__ import annotations

from typing import Final

from onnxexec.kernels import objload as nb

LANES: Final = 16


@nb.njit(inline="always", cache=True, nogil=True)
def row_max(x, acc):
    """max(x) of a non-empty 1-D float32 row (NaNs are not propagated: callers that care
    detect them through a sum); acc is a float32 (LANES,) scratch."""
    n = x.shape[0]
    m = x[0]
    if n < 2 * LANES:
        for j in range(n):
            if x[j] > m:
                m = x[j]
        return m
    for lane in range(LANES):
        acc[lane] = x[lane]
    full = n - n % LANES
    for j0 in range(LANES, full, LANES):
        xs = x[j0 : j0 + LANES]
        for lane in range(LANES):
            v = xs[lane]
            acc[lane] = v if v > acc[lane] else acc[lane]
    m = acc[0]
    for lane in range(1, LANES):
        if acc[lane] > m:
            m = acc[lane]
    for j in range(full, n):
        if x[j] > m:
            m = x[j]
    return m


@nb.njit(fastmath={"reassoc"}, cache=True, nogil=True)
def row_sum(x):
    """sum(x) in float64 of a 1-D float32 row."""
    total = 0.0
    for j in range(x.shape[0]):
        total += x[j]
    return total


@nb.njit(fastmath={"reassoc"}, cache=True, nogil=True)
def row_sumsq(x, mean):
    """sum((x - mean)^2) in float64 of a 1-D float32 row (mean a float64)."""
    total = 0.0
    for j in range(x.shape[0]):
        c = x[j] - mean
        total += c * c
    return total


@nb.njit(cache=True, nogil=True)
def sum_rows(x, scale, out):
    """out[r] = scale * sum(x[r]) (float64 sums, stored as float32) for x (R, C)
    float32 C-contiguous: ReduceSum / ReduceMean over trailing axes (a global average
    pool) in one pass, where numpy's reduction over two trailing axes of a (1, 1280, 7,
    7) tensor took ~50-180 us for 63K floats."""
    for r in range(x.shape[0]):
        out[r] = row_sum(x[r]) * scale
