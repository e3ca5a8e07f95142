"""kernels/sgemm_packed.py (AVX2 micro-kernels on a packed weight) and gemm.linear's
activation column range, against float64 numpy references, on 1-3 threads."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels import gemm, sgemm_packed
from onnxexec.kernels.activations import ACT, epilogue_reference

pytestmark = pytest.mark.skipif(not sgemm_packed.AVAILABLE, reason="no AVX2/FMA")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _want(x, w, b=None, code=0, alpha=0.0, beta=0.0, cols=None):
    y = x.astype(np.float64) @ w.astype(np.float64)
    if b is not None:
        y = y + b
    lo, hi = cols or (0, y.shape[-1])
    y[..., lo:hi] = epilogue_reference(y[..., lo:hi], None, code, alpha, beta)
    return y.astype(np.float32)


def test_pack_layout_and_unpack() -> None:
    w = _rand(5, 37)
    wp = sgemm_packed.pack(w)
    assert wp.shape == (3, 5, 16) and wp.flags.c_contiguous
    assert wp[1, 2, 3] == w[2, 19] and wp[2, 4, 4] == w[4, 36]
    assert not wp[2, :, 5:].any()  # zero padding past column N
    np.testing.assert_array_equal(sgemm_packed.unpack(wp, 37), w)


# rows: every micro-kernel height (1..6) and several row blocks (MC = 144); depth:
# below and across the KC = 768 blocking; columns: partial last panels
@pytest.mark.parametrize(
    "m, k, n",
    [(1, 7, 16), (5, 33, 21), (6, 64, 48), (13, 100, 130), (150, 800, 70), (64, 1600, 200)],
)
def test_linear_packed_matches_reference(threads, m, k, n) -> None:
    x, w, b = _rand(m, k), _rand(k, n, seed=1), _rand(n, seed=2)
    wp = sgemm_packed.pack(w)
    got = gemm.linear_packed(x, wp, n, b, ACT["Gelu"])
    np.testing.assert_allclose(got, _want(x, w, b, ACT["Gelu"]), rtol=1e-4, atol=1e-4)
    got = gemm.linear_packed(x.reshape(1, m, k), wp, n)
    assert got.shape == (1, m, n)
    np.testing.assert_allclose(got[0], _want(x, w), rtol=1e-4, atol=1e-4)


def test_linear_packed_strided_input_and_empty(threads) -> None:
    big = _rand(40, 90)
    x = big[:, 3:67]  # row stride 90, read in place
    w = _rand(64, 96, seed=1)
    wp = sgemm_packed.pack(w)
    np.testing.assert_allclose(gemm.linear_packed(x, wp, 96), _want(x, w), rtol=1e-4, atol=1e-4)
    assert gemm.linear_packed(np.zeros((0, 64), np.float32), wp, 96).shape == (0, 96)
    z = gemm.linear_packed(np.zeros((3, 0), np.float32), np.zeros((6, 0, 16), np.float32), 96)
    assert z.shape == (3, 96) and not z.any()
    with pytest.raises(ValueError):
        gemm.linear_packed(_rand(4, 63), wp, 96)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("cols", [(0, 96), (0, 40), (40, 200), (0, 0)])
def test_activation_column_range(threads, packed, cols) -> None:
    # the activation applies to [lo, hi) only; the bias everywhere (spans straddle it)
    x, w, b = _rand(70, 64), _rand(64, 200, seed=1), _rand(200, seed=2)
    want = _want(x, w, b, ACT["Silu"], cols=cols)
    if packed:
        got = gemm.linear_packed(x, sgemm_packed.pack(w), 200, b, ACT["Silu"], act_cols=cols)
    else:
        got = gemm.linear(x, w, b, ACT["Silu"], act_cols=cols)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
