"""kernels/linalg/sgemm_packed.py (AVX-512 and AVX2 micro-kernels on a packed weight) and
gemm.linear's activation column range, against float64 numpy references, on 1-3
threads. Every panel width the host runs is tested (on an AVX-512 machine both the
32-wide AVX-512 tiles and the 16-wide AVX2 ones)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.linalg import gemm, sgemm_packed
from onnxexec.kernels.math.activations import epilogue_reference

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


WIDTHS = pytest.mark.parametrize("nr", sgemm_packed.WIDTHS)


def test_host_kernel_choice() -> None:
    # the host's panel width follows its CPU: AVX-512 tiles where avx512f is present
    assert sgemm_packed.NR == (32 if sgemm_packed.AVX512 else 16)
    assert sgemm_packed.NR in sgemm_packed.WIDTHS and 16 in sgemm_packed.WIDTHS
    assert sgemm_packed.pack(_rand(3, 40)).shape == (-(-40 // sgemm_packed.NR), 3, sgemm_packed.NR)


@WIDTHS
def test_pack_layout_and_unpack(nr) -> None:
    w = _rand(5, 2 * nr + 5)
    wp = sgemm_packed.pack(w, nr)
    assert wp.shape == (3, 5, nr) and wp.flags.c_contiguous
    assert wp.ctypes.data % 64 == 0  # panel rows never straddle a cache line
    assert wp[1, 2, 3] == w[2, nr + 3] and wp[2, 4, 4] == w[4, 2 * nr + 4]
    assert not wp[2, :, 5:].any()  # zero padding past column N
    np.testing.assert_array_equal(sgemm_packed.unpack(wp, 2 * nr + 5), w)
    with pytest.raises(ValueError):
        sgemm_packed.pack(w, 8)


@WIDTHS
def test_span_every_tile_height(nr) -> None:
    # one thread, no epilogue: rows 1..2 MR + 1 cover every tile height and the split
    # of a row block into tiles of equal height; odd K, K = 1, N off the panel width
    mr = sgemm_packed.MR32 if nr == 32 else sgemm_packed.MR16
    for m in range(1, 2 * mr + 2):
        for k, n in ((1, nr), (7, nr + 3), (19, 3 * nr - 1)):
            x, w = _rand(m, k, seed=m), _rand(k, n, seed=k)
            wp = sgemm_packed.pack(w, nr)
            out = np.full((m, n), np.nan, dtype=np.float32)
            sgemm_packed.packed_span(
                x.ctypes.data, k, m, k, wp.ctypes.data, n, out.ctypes.data, n, 0, len(wp), nr
            )
            np.testing.assert_allclose(out, _want(x, w), rtol=1e-5, atol=1e-5)


# rows: tile heights and several row blocks (MC = 144); depth: below and across the
# KC blocking; columns: partial last panels
@WIDTHS
@pytest.mark.parametrize(
    "m, k, n",
    [(1, 7, 16), (5, 33, 21), (6, 64, 48), (13, 100, 130), (150, 800, 70), (64, 1600, 200)],
)
def test_linear_packed_matches_reference(threads, nr, m, k, n) -> None:
    x, w, b = _rand(m, k), _rand(k, n, seed=1), _rand(n, seed=2)
    wp = sgemm_packed.pack(w, nr)
    got = gemm.linear_packed(x, wp, n, b, ACT["Gelu"])
    np.testing.assert_allclose(got, _want(x, w, b, ACT["Gelu"]), rtol=1e-4, atol=1e-4)
    got = gemm.linear_packed(x.reshape(1, m, k), wp, n)
    assert got.shape == (1, m, n)
    np.testing.assert_allclose(got[0], _want(x, w), rtol=1e-4, atol=1e-4)


@WIDTHS
def test_linear_packed_strided_input_and_empty(threads, nr) -> None:
    big = _rand(40, 90)
    x = big[:, 3:67]  # row stride 90, read in place
    w = _rand(64, 96, seed=1)
    wp = sgemm_packed.pack(w, nr)
    np.testing.assert_allclose(gemm.linear_packed(x, wp, 96), _want(x, w), rtol=1e-4, atol=1e-4)
    assert gemm.linear_packed(np.zeros((0, 64), np.float32), wp, 96).shape == (0, 96)
    empty = np.zeros((96 // nr, 0, nr), np.float32)
    z = gemm.linear_packed(np.zeros((3, 0), np.float32), empty, 96)
    assert z.shape == (3, 96) and not z.any()
    with pytest.raises(ValueError):
        gemm.linear_packed(_rand(4, 63), wp, 96)
    with pytest.raises(ValueError):  # N beyond the packed panels
        gemm.linear_packed(x, wp, 96 + nr)


@pytest.mark.parametrize("nr", [0, *sgemm_packed.WIDTHS])  # 0: unpacked (BLAS)
@pytest.mark.parametrize("cols", [(0, 96), (0, 40), (40, 200), (0, 0)])
def test_activation_column_range(threads, nr, cols) -> None:
    # the activation applies to [lo, hi) only; the bias everywhere (spans straddle it)
    x, w, b = _rand(70, 64), _rand(64, 200, seed=1), _rand(200, seed=2)
    want = _want(x, w, b, ACT["Silu"], cols=cols)
    if nr:
        wp = sgemm_packed.pack(w, nr)
        got = gemm.linear_packed(x, wp, 200, b, ACT["Silu"], act_cols=cols)
    else:
        got = gemm.linear(x, w, b, ACT["Silu"], act_cols=cols)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
