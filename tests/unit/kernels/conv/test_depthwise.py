"""kernels/conv/depthwise.py against its numpy reference and a naive per-pixel loop."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnxexec.kernels.conv.depthwise import depthwise_conv2d, depthwise_conv2d_reference


def naive(xp, w, s, d, out_hw):
    n_b, c = xp.shape[:2]
    m = w.shape[0]
    y = np.zeros((n_b, m, *out_hw))
    for n, oc, i, j in itertools.product(range(n_b), range(m), *map(range, out_hw)):
        for a, b in itertools.product(range(w.shape[2]), range(w.shape[3])):
            y[n, oc, i, j] += (
                xp[n, oc // (m // c), i * s[0] + a * d[0], j * s[1] + b * d[1]] * w[oc, 0, a, b]
            )
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "mult,s,d", [(1, (1, 1), (1, 1)), (2, (2, 1), (1, 2)), (3, (2, 2), (2, 1))]
)
def test_depthwise_matches_reference_and_naive(dtype, mult, s, d):
    rng = np.random.default_rng(6)
    xp = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    w = rng.standard_normal((3 * mult, 1, 3, 2)).astype(dtype)
    oh = (9 - ((3 - 1) * d[0] + 1)) // s[0] + 1
    ow = (8 - ((2 - 1) * d[1] + 1)) // s[1] + 1
    y = depthwise_conv2d(xp, w, s, d, (oh, ow))
    assert y.dtype == dtype and y.shape == (2, 3 * mult, oh, ow)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(
        y, depthwise_conv2d_reference(xp, w, s, d, (oh, ow)), rtol=tol, atol=tol
    )
    np.testing.assert_allclose(y, naive(xp, w, s, d, (oh, ow)), rtol=tol, atol=tol)


def test_depthwise_rejects_bad_shapes():
    with pytest.raises(ValueError):
        depthwise_conv2d(
            np.zeros((1, 2, 3, 3), np.float32),
            np.zeros((3, 1, 2, 2), np.float32),
            (1, 1),
            (1, 1),
            (2, 2),
        )
    with pytest.raises(ValueError):
        depthwise_conv2d(
            np.zeros((1, 2, 3, 3), np.float32),
            np.zeros((2, 1, 2, 2), np.float32),
            (1, 1),
            (1, 1),
            (3, 3),
        )
