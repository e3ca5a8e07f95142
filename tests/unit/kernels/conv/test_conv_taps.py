"""kernels.conv.conv_taps (one sgemm per kernel tap on stride-phase planes) against a
float64 numpy conv: strides 1-3, dilation, asymmetric pads, groups, batch, residual,
activation, row-split and channel-split threading, and conv2d's dispatch to it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_rows import use_rows
from onnxexec.kernels.conv.conv_taps import ohwi, to_ohwi, use_taps
from onnxexec.native import parallel


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = parallel.num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)


@pytest.fixture(autouse=True)
def no_direct(monkeypatch):
    """The direct kernel (kernels/conv/conv_direct.py) takes these shapes first on AVX-512
    hosts; turned off here so that the tap-GEMM path itself is what runs."""
    import onnxexec.kernels.conv.conv2d as conv2d_module

    monkeypatch.setattr(conv2d_module, "use_direct", lambda *args: False)


def _reference(x, w, b, s, p, d, group):
    """float64 conv written out tap by tap: pads p = (top, left, bottom, right)."""
    n, h, wd = x.shape[0], x.shape[2], x.shape[3]
    m, cg, kh, kw = w.shape
    oh = (h + p[0] + p[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + p[1] + p[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g, a, bb in itertools.product(range(group), range(kh), range(kw)):
        patch = xp[
            :,
            g * cg : (g + 1) * cg,
            a * d[0] : a * d[0] + s[0] * (oh - 1) + 1 : s[0],
            bb * d[1] : bb * d[1] + s[1] * (ow - 1) + 1 : s[1],
        ]
        wg = w[g * mg : (g + 1) * mg, :, a, bb].astype(np.float64)
        y[:, g * mg : (g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg)
    if b is not None:
        y += b[None, :, None, None]
    return y, (oh, ow)


CASES = [
    # x shape, w shape, strides, pads, dilations, group
    ((1, 16, 20, 21), (24, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # ResNet 3x3
    ((2, 32, 23, 30), (40, 32, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),  # stride 2, batch 2
    ((1, 20, 33, 40), (24, 20, 3, 5), (2, 3), (0, 2, 1, 1), (2, 1), 1),  # mixed strides, dil
    ((1, 16, 31, 30), (8, 16, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),  # 7x7 stride 2
    ((1, 32, 18, 26), (48, 16, 3, 3), (1, 1), (1, 0, 2, 1), (1, 1), 2),  # grouped, asym pads
    ((1, 16, 40, 32), (256, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # several row tiles
    ((1, 64, 3, 40), (96, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 3 rows: channel split
    ((1, 32, 2, 60), (40, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # channels off the 16s
]


@pytest.mark.parametrize("shape,wshape,s,p,d,group", CASES)
@pytest.mark.parametrize("act", ["", "Relu", "Clip"])
def test_taps_against_reference(threads, shape, wshape, s, p, d, group, act) -> None:
    x = _rand(*shape)
    w = _rand(*wshape, seed=1) * np.float32(0.2)
    b = _rand(wshape[0], seed=2)
    want, out_hw = _reference(x, w, b, s, p, d, group)
    assert use_taps(wshape[1], out_hw[1], wshape[2], wshape[3])
    p_out = out_hw[0] * out_hw[1]
    assert not use_rows(wshape[1], wshape[0] // group, p_out, wshape[2], wshape[3])
    wo = to_ohwi(w)
    assert ohwi(wo) and not ohwi(w) and np.array_equal(wo, w)
    alpha, beta = (-1.0, 1.5) if act == "Clip" else (0.0, 0.0)
    got = conv2d(x, wo, b, s, p[:2], d, group, out_hw, ACT[act], alpha, beta)
    ref = {"": want, "Relu": np.maximum(want, 0), "Clip": np.clip(want, alpha, beta)}[act]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    # the OIHW weight takes the im2col paths: same result
    np.testing.assert_allclose(
        conv2d(x, w, b, s, p[:2], d, group, out_hw, ACT[act], alpha, beta),
        got,
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.parametrize("shape,wshape,s,p,d,group", CASES[:3])
def test_taps_residual(threads, shape, wshape, s, p, d, group) -> None:
    x = _rand(*shape)
    w = _rand(*wshape, seed=1) * np.float32(0.2)
    want, out_hw = _reference(x, w, None, s, p, d, group)
    z = _rand(*want.shape, seed=3)
    got = conv2d(x, to_ohwi(w), None, s, p[:2], d, group, out_hw, ACT["Relu"], z=z)
    np.testing.assert_allclose(got, np.maximum(want + z, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [CASES[0], CASES[-2]], ids=["rows", "channels"])
def test_taps_with_the_pool_busy(case) -> None:
    """Another caller holds the pool: the same spans run on the calling thread."""
    shape, wshape, s, p, d, group = case
    old = parallel.num_threads()
    parallel.set_num_threads(2)
    pool = parallel.native_pool()
    assert pool is not None
    try:
        x = _rand(*shape)
        w = _rand(*wshape, seed=1) * np.float32(0.2)
        want, out_hw = _reference(x, w, None, s, p, d, group)
        got = conv2d(x, to_ohwi(w), None, s, p[:2], d, group, out_hw)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    finally:
        pool.busy.release()
        parallel.set_num_threads(old)


def test_use_taps_thresholds() -> None:
    assert not use_taps(3, 112, 7, 7)  # RGB stem: K = 3 products are too short
    assert not use_taps(512, 7, 3, 3)  # 7-wide outputs: im2col is faster
    assert not use_taps(64, 56, 1, 1)  # 1x1: the pointwise path
