"""kernels/conv/pointwise_packed.py (the 1x1 conv on the packed micro-kernels) against
float64 numpy: partial panels and row tiles, depth past one KC block, sub-ranges of
rows and columns (nothing outside them written), bias / residual / activations, the
native job split over columns and over rows, and conv_gemm's choice of the path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv import conv_gemm, pointwise_packed

pytestmark = pytest.mark.skipif(
    not pointwise_packed.AVAILABLE, reason="no AVX2 / FMA: the packed kernels don't run here"
)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _want(w, x, b, z, act, alpha=0.0, beta=0.0):
    y = w.astype(np.float64) @ x.astype(np.float64)
    if b is not None:
        y += b[:, None]
    if z is not None:
        y += z
    if act == "Relu":
        y = np.maximum(y, 0.0)
    elif act == "Clip":
        y = np.clip(y, alpha, beta)
    elif act == "LeakyRelu":
        y = np.where(y >= 0, y, y * alpha)
    return y


@pytest.mark.parametrize(
    "m, c, p",
    [
        (96, 16, 1000),  # partial last panel
        (13, 3, 33),  # one row tile of 13 (> MR), one column past a panel
        (1, 1, 32),  # a single output row and input channel
        (40, 300, 200),  # depth past one KC block (256)
        (150, 24, 70),  # rows past one MC block (144)
    ],
)
@pytest.mark.parametrize(
    "has_b, has_z, act", [(0, 0, 0), (1, 0, "Clip"), (1, 1, "Relu"), (0, 1, "LeakyRelu")]
)
def test_block_span_matches_numpy(m, c, p, has_b, has_z, act) -> None:
    w, x = _rand(m, c, seed=1), _rand(c, p, seed=2)
    b = _rand(m, seed=3) if has_b else None
    z = _rand(m, p, seed=4) if has_z else None
    alpha, beta = (-0.5, 0.75) if act == "Clip" else (0.1, 0.0)
    y = np.full((m, p), np.nan, np.float32)
    nr = pointwise_packed.NR
    for cols in (nr, pointwise_packed.block_cols(m)):  # one panel per block, and several
        y[:] = np.nan
        pointwise_packed.pointwise_block_span(
            w, x, y, 0, np.zeros(1, np.float32) if b is None else b, b is not None,
            np.zeros((1, 1), np.float32) if z is None else z, z is not None,
            ACT[act] if act else 0, alpha, beta, 0, m, 0, p, nr, cols,
        )  # fmt: skip
        want = _want(w, x, b, z, act, alpha, beta)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_block_span_writes_only_its_rows_and_columns() -> None:
    m, c, p = 50, 20, 300
    w, x, b = _rand(m, c, seed=1), _rand(c, p, seed=2), _rand(m, seed=3)
    y = np.full((m, p), np.nan, np.float32)
    nr = pointwise_packed.NR
    m0, m1, j0, j1 = 7, 31, 2 * nr, 5 * nr + 9  # a column range ending inside a panel
    pointwise_packed.pointwise_block_span(
        w, x, y, 0, b, True, np.zeros((1, 1), np.float32), False, ACT["Relu"], 0.0, 0.0,
        m0, m1, j0, j1, nr, nr,
    )  # fmt: skip
    want = _want(w, x, b, None, "Relu")
    np.testing.assert_allclose(y[m0:m1, j0:j1], want[m0:m1, j0:j1], rtol=1e-4, atol=1e-4)
    outside = np.ones((m, p), bool)
    outside[m0:m1, j0:j1] = False
    assert np.isnan(y[outside]).all()


@pytest.mark.parametrize("axis", [0, 1])
def test_job_spans_cover_rows_or_columns(axis) -> None:
    """pointwise_job's two split axes, its spans run one after another here (the pool
    runs them on several threads: below)."""
    m, c, p = 70, 24, 700
    w, x, b, z = _rand(m, c, seed=1), _rand(c, p, seed=2), _rand(m, seed=3), _rand(m, p, seed=4)
    y = np.full((m, p), np.nan, np.float32)
    a = np.array(
        [w.ctypes.data, x.ctypes.data, y.ctypes.data, b.ctypes.data, z.ctypes.data,
         m, c, p, ACT["Clip"], axis],
        dtype=np.int64,
    )  # fmt: skip
    fa = np.array([0.0, 2.0])
    nr = pointwise_packed.NR
    cuts = [0, 3 * nr, 11 * nr, p] if axis else [0, 5, 40, m]
    for s0, s1 in itertools.pairwise(cuts):
        pointwise_packed.pointwise_job(a, fa, s0, s1)
    np.testing.assert_allclose(y, _want(w, x, b, z, "Clip", 0.0, 2.0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m, c, p", [(96, 16, 12544), (144, 24, 3136), (192, 32, 784)])
def test_pointwise_takes_the_packed_path_for_expanding_layers(
    threads, monkeypatch, m, c, p
) -> None:
    """MobileNetV2's expand layers go through the packed kernels (on the pool with 2
    or 3 threads: conftest's `threads`) and match numpy with bias, residual and Clip.
    The direct kernel (kernels/conv/conv_direct.py), which takes these shapes first on
    AVX-512 hosts, is turned off here."""
    monkeypatch.setattr(conv_gemm, "use_direct_pointwise", lambda c, p: False)
    assert conv_gemm.use_packed(c, m, p)
    w, x, b, z = _rand(m, c, seed=1), _rand(c, p, seed=2), _rand(m, seed=3), _rand(m, p, seed=4)
    y = np.full((m, p), np.nan, np.float32)
    conv_gemm.pointwise(w, x, y, b, z, ACT["Clip"], 0.0, 6.0)
    np.testing.assert_allclose(y, _want(w, x, b, z, "Clip", 0.0, 6.0), rtol=1e-4, atol=1e-4)


def test_use_packed_rule() -> None:
    assert conv_gemm.use_packed(16, 96, 12544)
    # AVX-512 hosts also pack projections from 28x28 up and small few-pixel products
    avx512 = pointwise_packed.AVX512
    assert conv_gemm.use_packed(144, 24, 3136) == avx512  # projection
    assert conv_gemm.use_packed(320, 1280, 49) == avx512  # few pixels, 2^19 weight
    assert conv_gemm.use_packed(96, 576, 196) == avx512  # 14x14, 2^16 weight
    assert not conv_gemm.use_packed(1024, 256, 196)  # ResNet-50's 14x14: OpenBLAS
    assert not conv_gemm.use_packed(512, 2048, 49)  # ResNet-50's 7x7: OpenBLAS


@pytest.mark.parametrize(
    "m, c, p", [(160, 960, 49), (960, 160, 49), (96, 576, 196), (32, 192, 784)]
)
def test_small_and_projecting_products_on_avx512(threads, m, c, p) -> None:
    """The shapes use_packed sends to the packed kernels on AVX-512 hosts only (few
    pixels, projections): same results as numpy with bias, residual and Relu."""
    w, x, b, z = _rand(m, c, seed=1), _rand(c, p, seed=2), _rand(m, seed=3), _rand(m, p, seed=4)
    assert conv_gemm.use_packed(c, m, p) == pointwise_packed.AVX512
    y = np.full((m, p), np.nan, np.float32)
    conv_gemm.pointwise(w, x, y, b, z, ACT["Relu"], 0.0, 0.0)
    np.testing.assert_allclose(y, _want(w, x, b, z, "Relu", 0.0, 0.0), rtol=1e-4, atol=1e-4)
