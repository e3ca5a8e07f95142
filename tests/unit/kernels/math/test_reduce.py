"""kernels/math/reduce.py's lane reductions against numpy (float64 sums, max)."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest

from onnxexec.kernels.math.reduce import row_max, row_sum, row_sumsq


@nb.njit(cache=True)
def _all(x, mean):
    return (
        row_max(x, np.empty(16, np.float32)),
        row_sum(x),
        row_sumsq(x, mean),
    )


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 31, 32, 33, 100, 768, 1031])
def test_matches_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3 + 1).astype(np.float32)
    m = float(x.astype(np.float64).mean())
    mx, s, sq = _all(x, m)
    assert mx == x.max()
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(s, x64.sum(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sq, ((x64 - m) ** 2).sum(), rtol=1e-12)


@pytest.mark.parametrize("where", [0, 5, 16, 40, 99])
def test_max_finds_the_maximum_anywhere(where: int) -> None:
    x = np.full(100, -2.0, dtype=np.float32)
    x[where] = 7.5
    assert _all(x, 0.0)[0] == np.float32(7.5)


def test_max_of_all_minus_inf_and_nan_sum() -> None:
    x = np.full(40, -np.inf, dtype=np.float32)
    assert _all(x, 0.0)[0] == -np.inf
    y = np.ones(40, dtype=np.float32)
    y[33] = np.nan
    assert np.isnan(_all(y, 0.0)[1])  # a NaN reaches the sum, which callers test
