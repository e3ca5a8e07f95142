"""kernels/math/sigmoid.py against numpy float64 (1 / (1 + e**-x), rounded once), bit
for bit, over the float32 range, special values and any layout."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.math.sigmoid import sigmoid32


def _oracle(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint32)


def test_matches_float64_formula_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            (rng.standard_normal(200_000) * 30).astype(np.float32),
            np.linspace(-104, 90, 100_001, dtype=np.float32),  # subnormal and saturated ends
            np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38], np.float32),
        ]
    )
    y = sigmoid32(x)
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_array_equal(_bits(y), _bits(_oracle(x)))


@pytest.mark.parametrize("make", [lambda a: a.T, lambda a: a[:, ::2], lambda a: np.array(a[0, 0])])
def test_any_layout_and_rank(make) -> None:
    a = (np.random.default_rng(1).standard_normal((3, 8)) * 5).astype(np.float32)
    x = make(a)
    y = sigmoid32(x)
    assert y.shape == x.shape and y.flags.c_contiguous
    # the executor's fast path checks `dtype is float32`: the output must carry numpy's own
    assert y.dtype is np.dtype(np.float32)
    np.testing.assert_array_equal(y, _oracle(np.asarray(x)))
