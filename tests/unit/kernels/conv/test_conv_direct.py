"""kernels.conv.conv_direct (register-blocked tiles over every tap, reading the phase planes
or the 1x1 input in place) against a float64 numpy conv: strides, dilation,
asymmetric pads, groups, batch, the stems' few input channels, row counts that are
not a multiple of the 12-row tile, partial 32-column panels, bias / residual / every
fused activation, NaN through Relu / Clip, the block and channel splits on the
pool, conv2d's dispatch to it, and the 3x3 depthwise kernel's AVX-512 run."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv import direct_job
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_direct import (
    conv_direct,
    pointwise_direct,
    use_direct,
    use_direct_pointwise,
)
from onnxexec.kernels.conv.conv_taps import to_ohwi
from onnxexec.kernels.conv.depthwise import depthwise2d_fused, inplace_masks
from tests.unit.kernels._guard import guarded
from tests.unit.kernels.conv.test_conv_taps import _reference

pytestmark = pytest.mark.skipif(not direct_job.AVAILABLE, reason="needs AVX-512 (avx512f)")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _act_ref(y: np.ndarray, code: int, alpha: float, beta: float) -> np.ndarray:
    """The fused activations in float64 (kernels/math/activations.py's codes)."""
    from math import erf

    if code == ACT["Relu"]:
        return np.maximum(y, 0.0)
    if code == ACT["Clip"]:
        return np.minimum(np.maximum(y, alpha), beta)
    if code == ACT["LeakyRelu"]:
        return np.where(y >= 0, y, y * alpha)
    if code == ACT["Gelu"]:
        return 0.5 * y * (1.0 + np.vectorize(erf)(y / np.sqrt(2.0)))
    if code == ACT["Sigmoid"]:
        return 1.0 / (1.0 + np.exp(-y))
    assert code == 0
    return y


KXK = [
    # x shape, w shape, strides, pads (top, left, bottom, right), dilations, group
    ((1, 16, 20, 21), (24, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # 3x3, 2 tiles of 12
    ((2, 32, 9, 7), (40, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # batch 2, 7 wide
    ((1, 3, 45, 47), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),  # 7x7 stem
    ((1, 3, 33, 32), (13, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),  # 3x3 stem, 13 rows
    ((1, 20, 17, 19), (8, 20, 3, 5), (2, 3), (0, 2, 1, 1), (2, 1), 1),  # mixed strides, dil
    ((1, 32, 18, 26), (48, 16, 3, 3), (1, 1), (1, 0, 2, 1), (1, 1), 2),  # grouped, asym pads
    ((1, 8, 12, 12), (5, 8, 2, 2), (1, 1), (0, 0, 0, 0), (2, 2), 1),  # dilated 2x2, 5 rows
]
ACTS = [("", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Clip", -0.5, 0.7), ("LeakyRelu", 0.1, 0.0)]


@pytest.mark.parametrize("shape, wshape, s, p, d, group", KXK)
@pytest.mark.parametrize("act, alpha, beta", ACTS)
def test_kxk_against_reference(threads, shape, wshape, s, p, d, group, act, alpha, beta):
    x, w, b = _rand(*shape), _rand(*wshape, seed=1), _rand(wshape[0], seed=2)
    ref, out_hw = _reference(x, w, b, s, p, d, group)
    code = ACT[act]
    assert use_direct(wshape[1], *wshape[2:], *s, *shape[2:])  # conv2d takes this path
    y = conv2d(x, to_ohwi(w), b, s, p, d, group, out_hw, code, alpha, beta)
    np.testing.assert_allclose(y, _act_ref(ref, code, alpha, beta), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, wshape, s, p, d, group", KXK[:4])
@pytest.mark.parametrize("act", ["", "Relu", "Gelu"])
def test_kxk_residual(threads, shape, wshape, s, p, d, group, act):
    """act(conv + bias + z): the residual comes before the activation, so the tiles
    leave the clamp to the epilogue."""
    x, w = _rand(*shape), _rand(*wshape, seed=1)
    ref, out_hw = _reference(x, w, None, s, p, d, group)
    z = _rand(*ref.shape, seed=3)
    y = conv2d(x, to_ohwi(w), None, s, p, d, group, out_hw, ACT[act], 0.0, 0.0, z)
    expect = _act_ref(ref + z, ACT[act], 0.0, 0.0)
    np.testing.assert_allclose(y, expect, rtol=1e-4, atol=1e-4)


def test_kxk_called_directly_matches_the_reference():
    """conv_direct itself on one image: y (M, OH*OW) written in place."""
    x, w, b = _rand(1, 12, 15, 16), _rand(30, 12, 3, 3, seed=1), _rand(30, seed=2)
    ref, (oh, ow) = _reference(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    y = np.full((30, oh * ow), np.nan, dtype=np.float32)
    wo = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    conv_direct(x[0], 0, 12, wo, y, (1, 1), (1, 1), (1, 1), (oh, ow), b, None, 0, 0.0, 0.0)
    np.testing.assert_allclose(y.reshape(ref.shape), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "c, m, p",
    [(16, 96, 12544), (24, 37, 3136 + 5), (64, 256, 3136), (32, 192, 784), (7, 12, 100)],
)
@pytest.mark.parametrize("act, alpha, beta", [*ACTS, ("Sigmoid", 0.0, 0.0)])
@pytest.mark.parametrize("residual", [False, True])
def test_pointwise_against_reference(threads, c, m, p, act, alpha, beta, residual):
    """Full panels stored by the tiles, a partial last panel through the scratch."""
    wm, xm, b = _rand(m, c, seed=1), _rand(c, p), _rand(m, seed=2)
    z = _rand(m, p, seed=3) if residual else None
    y = np.full((m, p), np.nan, dtype=np.float32)
    code = ACT[act]
    pointwise_direct(wm, xm, y, b, z, code, alpha, beta)
    ref = wm.astype(np.float64) @ xm.astype(np.float64) + b[:, None]
    if z is not None:
        ref = ref + z
    np.testing.assert_allclose(y, _act_ref(ref, code, alpha, beta), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act, low, high", [("Relu", 0.0, np.inf), ("Clip", 0.0, 6.0)])
def test_nan_stays_nan_through_the_clamp(act, low, high):
    """The tiles' max / min keep NaN, as numpy's maximum / minimum (and onnxruntime's
    Relu / Clip) do, and leave the other outputs alone."""
    wm, xm = _rand(24, 16, seed=1), _rand(16, 3136)
    xm[3, 100] = np.nan
    y = np.empty((24, 3136), dtype=np.float32)
    pointwise_direct(wm, xm, y, None, None, ACT[act], low, high)
    assert np.isnan(y[:, 100]).all()
    ok = np.ones(3136, dtype=bool)
    ok[100] = False
    ref = np.clip(wm.astype(np.float64) @ xm[:, ok], low, high)
    np.testing.assert_allclose(y[:, ok], ref, rtol=1e-4, atol=1e-4)


def test_dispatch_rules():
    """KxK: stride 1 always; strided only with few input channels or small planes.
    1x1: few input channels over many pixels."""
    assert use_direct(64, 3, 3, 1, 1, 56, 56)
    assert use_direct(3, 7, 7, 2, 2, 224, 224)  # ResNet's stem
    assert use_direct(3, 3, 3, 2, 2, 224, 224)  # MobileNetV2's stem
    assert not use_direct(128, 3, 3, 2, 2, 56, 56)  # big phase planes: conv_taps / im2col
    assert use_direct(256, 3, 3, 2, 2, 28, 28)  # mid-size planes, a 14x14 output
    assert not use_direct(512, 3, 3, 2, 2, 14, 14)  # a 7x7 output fills its tiles badly
    assert not use_direct(64, 1, 1, 1, 1, 56, 56)  # 1x1 goes through conv_gemm.pointwise
    assert use_direct_pointwise(64, 3136) and use_direct_pointwise(16, 12544)
    assert not use_direct_pointwise(512, 49) and not use_direct_pointwise(320, 3136)


@pytest.mark.parametrize("act, alpha, beta", [*ACTS, ("Sigmoid", 0.0, 0.0)])
def test_depthwise_run_against_reference(threads, act, alpha, beta):
    """The 3x3 depthwise kernel's AVX-512 run (kernels/conv/dw_asm.py): the clamp in
    registers for Relu / Clip, the numba epilogue for the other activations."""
    x, w, b = _rand(1, 24, 30, 33), _rand(24, 1, 3, 3, seed=1), _rand(24, seed=2)
    ref, out_hw = _reference(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 24)
    out = np.empty((1, 24, *out_hw), dtype=np.float32)
    code = ACT[act]
    depthwise2d_fused(x, w, b, (1, 1), (1, 1), (1, 1), out, code, alpha, beta)
    np.testing.assert_allclose(out, _act_ref(ref, code, alpha, beta), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act, low, high", [("Relu", 0.0, np.inf), ("Clip", 0.0, 6.0)])
def test_depthwise_nan_stays_nan(act, low, high):
    """A NaN input pixel makes NaN of the outputs whose taps read it, through the
    run's clamp, and only of those."""
    x, w = _rand(1, 4, 12, 40), _rand(4, 1, 3, 3, seed=1)
    x[0, 2, 5, 17] = np.nan
    out = np.empty((1, 4, 12, 40), dtype=np.float32)
    depthwise2d_fused(x, w, None, (1, 1), (1, 1), (1, 1), out, ACT[act], low, high)
    hit = np.zeros(out.shape, dtype=bool)
    hit[0, 2, 4:7, 16:19] = True
    assert np.isnan(out[hit]).all()
    ref, _ = _reference(np.nan_to_num(x, nan=0.0), w, None, (1, 1), (1, 1, 1, 1), (1, 1), 4)
    np.testing.assert_allclose(out[~hit], np.clip(ref, low, high)[~hit], rtol=1e-4, atol=1e-4)


# the in-place depthwise run (depthwise._inplace_masks, depthwise_planes.dw_inplace)
INPLACE = [(960, 7, 7), (384, 14, 14), (5, 1, 1), (3, 2, 5), (4, 16, 16), (2, 9, 33), (8, 28, 28)]


@pytest.mark.parametrize("c, h, w", INPLACE)
@pytest.mark.parametrize("act, alpha, beta", [("", 0.0, 0.0), ("Relu", 0, 0), ("Clip", 0, 6)])
def test_inplace_depthwise_against_reference(threads, c, h, w, act, alpha, beta):
    """3x3, stride 1, pad 1: every border case of the tap masks (one-pixel planes, one
    row, widths a multiple of 16 and not, planes past one 16-lane step), channel
    multiplier 2 included."""
    for mult in (1, 2):
        x, wt = _rand(1, c, h, w), _rand(c * mult, 1, 3, 3, seed=1)
        b = _rand(c * mult, seed=2)
        code = ACT[act]
        geo = (h, w, h, w, 3, 3, 1, 1, 1, 1, 1, 1)
        assert inplace_masks(geo, wt.reshape(-1, 9), True, code) is not None
        ref, out_hw = _reference(x, wt, b, (1, 1), (1, 1, 1, 1), (1, 1), c)
        out = np.empty((1, c * mult, *out_hw), dtype=np.float32)
        depthwise2d_fused(x, wt, b, (1, 1), (1, 1), (1, 1), out, code, alpha, beta)
        np.testing.assert_allclose(out, _act_ref(ref, code, alpha, beta), rtol=1e-4, atol=1e-4)


def test_inplace_depthwise_reads_nothing_outside_the_planes(threads):
    """The planes fill one page between two inaccessible ones: the taps' masked-off
    lanes before the first plane and past the last must not be read (AVX-512 fault
    suppression)."""
    c = mmap.PAGESIZE // 4 // 256
    w = _rand(c, 1, 3, 3, seed=1)
    with guarded((1, c, 16, 16)) as x:
        want, _ = _reference(x.copy(), w, None, (1, 1), (1, 1, 1, 1), (1, 1), c)
        out = np.empty((1, c, 16, 16), dtype=np.float32)
        depthwise2d_fused(x, w, None, (1, 1), (1, 1), (1, 1), out, 0, 0.0, 0.0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_inplace_depthwise_only_where_it_applies(threads):
    """Other padding, a residual, other activations and non-finite weights keep the
    padded-plane path; an infinite weight times a padding zero is NaN there."""
    wk = _rand(8, 9)
    geo = (14, 14, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1)
    assert inplace_masks(geo, wk, True, ACT["Clip"]) is not None
    assert inplace_masks((14, 14, 12, 12, 3, 3, 1, 1, 0, 0, 1, 1), wk, True, 0) is None
    assert inplace_masks(geo, wk, False, 0) is None
    assert inplace_masks(geo, wk, True, ACT["Sigmoid"]) is None
    wk[3, 0] = np.inf
    assert inplace_masks(geo, wk, True, 0) is None
    x, w = _rand(1, 8, 14, 14), wk.reshape(8, 1, 3, 3)
    out = np.empty((1, 8, 14, 14), dtype=np.float32)
    depthwise2d_fused(x, w, None, (1, 1), (1, 1), (1, 1), out, 0, 0.0, 0.0)
    assert np.isnan(out[0, 3, 0, :]).all() and np.isnan(out[0, 3, :, 0]).all()
    assert np.isfinite(out[0, 2]).all()


# the stride-2 in-place run (depthwise_planes.dw_inplace_s2, dw_asm.dw9_s2_run)
INPLACE_S2 = [(96, 112, 112), (576, 14, 14), (3, 7, 9), (5, 2, 2), (6, 35, 50), (4, 3, 64)]
S2_CASES = [(*p, q) for p in INPLACE_S2 for q in ((1, 1, 1, 1), (1, 1, 0, 0), (1, 1, 0, 1))]


@pytest.mark.parametrize("c, h, w, pads", [*S2_CASES, (2, 1, 1, (1, 1, 1, 1))])
def test_inplace_s2_depthwise_against_reference(threads, c, h, w, pads):
    """3x3, stride 2, pad-begin 1: odd and even sizes (a last tap row or column in the
    end padding or not), rows of one step and of several with a partial last one,
    single-pixel planes, channel multiplier 2; Clip, Relu and no activation."""
    for mult, (act, alpha, beta) in ((1, ("Clip", 0.0, 6.0)), (2, ("Relu", 0, 0)), (1, ("", 0, 0))):
        x, wt = _rand(1, c, h, w), _rand(c * mult, 1, 3, 3, seed=1)
        b = _rand(c * mult, seed=2)
        code = ACT[act]
        ref, out_hw = _reference(x, wt, b, (2, 2), pads, (1, 1), c)
        geo = (h, w, *out_hw, 3, 3, 2, 2, 1, 1, 1, 1)
        assert inplace_masks(geo, wt.reshape(-1, 9), True, code) is not None
        out = np.full((1, c * mult, *out_hw), np.nan, dtype=np.float32)
        depthwise2d_fused(x, wt, b, (2, 2), (1, 1), (1, 1), out, code, alpha, beta)
        np.testing.assert_allclose(out, _act_ref(ref, code, alpha, beta), rtol=1e-4, atol=1e-4)


def test_inplace_s2_depthwise_reads_nothing_outside_the_planes(threads):
    """As the stride-1 guard-page test: the last row's loads past the plane end are
    masked off, so the page after the planes is never touched."""
    c = mmap.PAGESIZE // 4 // (15 * 17)
    w = _rand(c, 1, 3, 3, seed=1)
    with guarded((1, c, 15, 17)) as x:
        want, out_hw = _reference(x.copy(), w, None, (2, 2), (1, 1, 1, 1), (1, 1), c)
        out = np.empty((1, c, *out_hw), dtype=np.float32)
        depthwise2d_fused(x, w, None, (2, 2), (1, 1), (1, 1), out, 0, 0.0, 0.0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_inplace_s2_depthwise_padding_times_infinity_is_nan(threads):
    """The stride-2 run loads its padding as zeros and multiplies them, so an infinite
    weight gives NaN wherever its tap falls in the padding, as the spec's padded conv
    does (and finite values elsewhere); a residual or Sigmoid keeps the padded path."""
    wk = _rand(8, 9)
    geo = (14, 14, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1)
    assert inplace_masks(geo, wk, False, 0) is None
    assert inplace_masks(geo, wk, True, ACT["Sigmoid"]) is None
    assert inplace_masks((14, 14, 6, 6, 3, 3, 2, 2, 0, 0, 1, 1), wk, True, 0) is None
    wk[3, 0] = np.inf  # tap (0, 0): the top row and left column of outputs read padding
    assert inplace_masks(geo, wk, True, 0) is not None
    x = np.abs(_rand(1, 8, 14, 14)) + 0.5
    out = np.empty((1, 8, 7, 7), dtype=np.float32)
    depthwise2d_fused(x, wk.reshape(8, 1, 3, 3), None, (2, 2), (1, 1), (1, 1), out, 0, 0.0, 0.0)
    hit = np.zeros((7, 7), dtype=bool)
    hit[0, :], hit[:, 0] = True, True
    assert np.isnan(out[0, 3][hit]).all() and np.isposinf(out[0, 3][~hit]).all()
    assert np.isfinite(out[0, 2]).all()
