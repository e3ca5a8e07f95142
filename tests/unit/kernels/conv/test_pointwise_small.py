"""kernels/conv/pointwise_small.py (1x1 convs of small outputs on pointwise_t's pixel x
channel tiles) against a float64 numpy product: channel counts that are and are not a
multiple of the 32-channel panel, pixel counts from one to a 7 x 7 plane (every tile
height), bias / residual / Relu / Clip, NaN through the clamp, batches, 1-3 threads,
nothing written outside the output, conv2d's dispatch and the packed weight's life."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv import pointwise_small as ps
from onnxexec.kernels.conv import pointwise_t as pt
from onnxexec.kernels.conv.conv2d import conv2d

pytestmark = pytest.mark.skipif(not pt.AVAILABLE, reason="needs AVX-512 (avx512f)")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _want(x, w, b, z, act, low, high):
    y = np.einsum("mc,ncp->nmp", w.reshape(w.shape[0], -1).astype(np.float64),
                  x.reshape(x.shape[0], x.shape[1], -1).astype(np.float64))  # fmt: skip
    y = y.reshape(x.shape[0], w.shape[0], *x.shape[2:])
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    if z is not None:
        y = y + z
    if act == ACT["Relu"]:
        y = np.maximum(y, 0)
    elif act == ACT["Clip"]:
        y = np.clip(y, low, high)
    return y


SHAPES = [(320, 1280, 7, 7), (960, 160, 7, 7), (24, 40, 7, 7), (7, 33, 1, 1), (5, 16, 3, 4),
          (64, 100, 2, 6), (3, 1, 5, 5), (130, 70, 6, 8)]  # fmt: skip


@pytest.mark.parametrize("c, m, h, w", SHAPES)
@pytest.mark.parametrize("act", ["", "Relu", "Clip"])
def test_small_pointwise_against_reference(threads, c, m, h, w, act):
    x, wt, b = _rand(1, c, h, w), _rand(m, c, 1, 1, seed=1), _rand(m, seed=2)
    code = ACT[act]
    assert ps.use_small(c, m, h * w, code)
    for bias, z in ((b, None), (None, _rand(1, m, h, w, seed=3)), (b, _rand(1, m, h, w, seed=4))):
        # the output inside a NaN-filled buffer: the scatter's masked lanes write nothing
        buf = np.full(m * h * w + 64, np.nan, dtype=np.float32)
        out = buf[32 : 32 + m * h * w].reshape(1, m, h, w)
        ps.conv1x1_small(x, wt, bias, z, out, code, 0.0, 6.0)
        np.testing.assert_allclose(out, _want(x, wt, bias, z, code, 0.0, 6.0), rtol=1e-4, atol=1e-4)
        assert np.isnan(buf[:32]).all() and np.isnan(buf[32 + m * h * w :]).all()


def test_small_pointwise_batch_and_nan(threads):
    """Two images, one job each; a NaN input stays NaN through Relu and Clip."""
    x, wt, b = _rand(2, 96, 7, 7), _rand(200, 96, 1, 1, seed=1), _rand(200, seed=2)
    x[1, 5, 3, 4] = np.nan
    for code in (ACT["Relu"], ACT["Clip"]):
        out = np.empty((2, 200, 7, 7), dtype=np.float32)
        ps.conv1x1_small(x, wt, b, None, out, code, -1.0, 1.0)
        want = _want(x, wt, b, None, code, -1.0, 1.0)
        assert np.isnan(out[1, :, 3, 4]).all() and not np.isnan(out[0]).any()
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_conv2d_dispatch(threads):
    """conv2d sends 1x1, stride-1, unpadded, ungrouped convs of up to 49 pixels with
    no activation, Relu or Clip here; others keep their paths (same results)."""
    assert ps.use_small(320, 1280, 49, ACT["Clip"])
    assert not ps.use_small(320, 1280, 50, 0)
    assert not ps.use_small(320, 1280, 49, ACT["Sigmoid"])
    x, wt, b = _rand(1, 64, 7, 7), _rand(96, 64, 1, 1, seed=1), _rand(96, seed=2)
    panels = ps.Panels(wt)
    got = conv2d(x, wt, b, (1, 1), (0, 0, 0, 0), (1, 1), 1, (7, 7), ACT["Relu"], panels=panels)
    assert panels._wp is not None  # the small path ran, on the caller's panels
    np.testing.assert_allclose(got, _want(x, wt, b, None, ACT["Relu"], 0, 0), rtol=1e-4, atol=1e-4)
    sig = conv2d(x, wt, b, (1, 1), (0, 0, 0, 0), (1, 1), 1, (7, 7), ACT["Sigmoid"])
    ref = 1.0 / (1.0 + np.exp(-_want(x, wt, b, None, 0, 0, 0)))
    np.testing.assert_allclose(sig, ref, rtol=1e-4, atol=1e-4)


def test_panels_pack_once_and_go_with_their_holder():
    w = _rand(64, 40, 1, 1)
    panels = ps.Panels(w)
    wp = panels.get()
    assert wp.shape == (2, 40, 32) and panels.get() is wp
    np.testing.assert_array_equal(wp[1, :, :].T, w.reshape(64, 40)[32:])
    gone = weakref.ref(wp)
    del panels, wp
    gc.collect()
    assert gone() is None  # no module-level cache keeps them


def test_strided_conv2d_subsamples_into_the_small_path(threads):
    """A stride-2 1x1 conv (ResNet-50's 14x14 -> 7x7 downsample) subsamples its input,
    then runs here; the residual comes along."""
    x, wt, b = _rand(1, 48, 14, 14), _rand(80, 48, 1, 1, seed=1), _rand(80, seed=2)
    z = _rand(1, 80, 7, 7, seed=3)
    panels = ps.Panels(wt)
    got = conv2d(
        x, wt, b, (2, 2), (0, 0, 0, 0), (1, 1), 1, (7, 7), ACT["Relu"], 0.0, 0.0, z, panels
    )
    assert panels._wp is not None
    want = _want(x[:, :, ::2, ::2], wt, b, z, ACT["Relu"], 0, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
