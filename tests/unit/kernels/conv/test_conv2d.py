"""kernels.conv.conv2d / kernels.conv.depthwise fast paths against a float64 numpy reference:
the direct depthwise kernel (stride phases, padding, dilation, multiplier, residual,
short and long rows), the pointwise, wide, row-tiled and channel-split GEMM paths on
one and two threads, and the FusedConv handler's geometry cache."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.depthwise import depthwise2d_fused
from onnxexec.native import parallel
from onnxexec.ops.fused_linear import fused_conv


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = parallel.num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)


def _reference(x, w, b, s, p, d, group):
    """float64 conv: pads p = (top, left, bottom, right); returns (y, (OH, OW))."""
    n, h, wd = x.shape[0], x.shape[2], x.shape[3]
    m, cg, kh, kw = w.shape
    oh = (h + p[0] + p[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + p[1] + p[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for oc, a, bb in itertools.product(range(m), range(kh), range(kw)):
        g = oc // mg
        patch = xp[
            :,
            g * cg : (g + 1) * cg,
            a * d[0] : a * d[0] + s[0] * (oh - 1) + 1 : s[0],
            bb * d[1] : bb * d[1] + s[1] * (ow - 1) + 1 : s[1],
        ]
        y[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, a, bb].astype(np.float64))
    if b is not None:
        y += b[None, :, None, None]
    return y, (oh, ow)


@pytest.mark.parametrize(
    "shape,mult,k,s,p,d",
    [
        ((1, 5, 7, 7), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # MobileNet's 7x7 layer
        ((2, 3, 20, 23), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # long rows, batch 2
        ((1, 4, 24, 24), 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # stride 2, even width
        ((1, 4, 15, 17), 1, (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),  # stride 2, odd, pw odd
        ((1, 3, 13, 12), 2, (3, 3), (2, 1), (2, 0, 1, 2), (1, 1)),  # mixed strides, mult 2
        ((1, 2, 19, 18), 1, (5, 5), (2, 2), (2, 2, 2, 2), (1, 1)),  # 5x5 stride 2
        ((1, 3, 16, 14), 1, (3, 2), (3, 3), (1, 2, 0, 1), (2, 1)),  # stride 3, dilation
        ((1, 2, 40, 70), 1, (3, 3), (1, 1), (1, 1, 1, 1), (2, 2)),  # more rows than a block
        ((1, 6, 64, 61), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # native job, 4 spans
        ((1, 3, 16, 16), 1, (3, 3), (1, 1), (0, 2, 2, 0), (1, 1)),  # rows of one full vector
        ((1, 2, 9, 48), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # three, no masked rest
        ((1, 2, 6, 1), 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # one-float rows
        ((2, 5, 70, 66), 2, (3, 3), (2, 2), (1, 0, 1, 1), (1, 1)),  # native, stride 2, mult 2
    ],
)
@pytest.mark.parametrize("act", ["", "Clip", "Relu"])
def test_depthwise_fused_against_reference(threads, shape, mult, k, s, p, d, act) -> None:
    c = shape[1]
    x = _rand(*shape)
    w = _rand(c * mult, 1, *k, seed=1)
    b = _rand(c * mult, seed=2)
    want, out_hw = _reference(x, w, b, s, p, d, c)
    alpha, beta = (-0.5, 0.75) if act == "Clip" else (0.0, 0.0)
    code = ACT[act]
    out = np.empty((shape[0], c * mult, *out_hw), dtype=np.float32)
    got = depthwise2d_fused(x, w, b, s, p[:2], d, out, code, alpha, beta)
    ref = {"": want, "Clip": np.clip(want, alpha, beta), "Relu": np.maximum(want, 0)}[act]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    z = _rand(*want.shape, seed=3)  # residual before the activation, no bias
    out2 = np.empty_like(out)
    got = depthwise2d_fused(x, w, None, s, p[:2], d, out2, code, alpha, beta, z)
    want_z = want - b[None, :, None, None] + z
    ref = {"": want_z, "Clip": np.clip(want_z, alpha, beta), "Relu": np.maximum(want_z, 0)}
    np.testing.assert_allclose(got, ref[act], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape,wshape,s,p,group",
    [
        ((1, 64, 7, 7), (128, 64, 3, 3), (1, 1), (1, 1, 1, 1), 1),  # narrow: rows, channel split
        ((1, 32, 14, 14), (96, 32, 3, 3), (2, 2), (1, 1, 1, 1), 1),  # strided, channel split
        ((1, 8, 30, 33), (16, 8, 3, 3), (1, 1), (1, 1, 1, 1), 1),  # wide path, row tiles
        ((1, 8, 30, 33), (16, 4, 3, 3), (1, 1), (0, 2, 1, 0), 2),  # wide path, grouped
        ((1, 3, 40, 38), (8, 3, 7, 7), (2, 2), (3, 3, 3, 3), 1),  # wide path, strided 7x7 stem
        ((1, 4, 41, 52), (6, 2, 5, 5), (2, 3), (1, 2, 2, 0), 2),  # wide, mixed strides, grouped
        ((1, 96, 7, 7), (512, 96, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # pointwise, channel split
        ((1, 16, 56, 56), (96, 16, 1, 1), (1, 1), (0, 0, 0, 0), 1),  # pointwise, column split
        ((1, 64, 14, 14), (256, 64, 1, 1), (2, 2), (0, 0, 0, 0), 1),  # strided 1x1
        ((2, 24, 15, 13), (40, 24, 1, 1), (2, 3), (0, 0, 0, 0), 1),  # strided 1x1, odd, batch
        ((1, 32, 9, 9), (48, 16, 1, 1), (2, 2), (0, 0, 1, 1), 2),  # strided grouped, end pads
        ((1, 3, 64, 61), (16, 3, 3, 3), (2, 2), (1, 1, 1, 0), 1),  # gather row tiles (native)
        ((1, 3, 96, 90), (32, 3, 3, 3), (2, 2), (1, 1, 1, 1), 1),  # row tiles, packed tiles (stem)
        ((1, 6, 96, 100), (16, 3, 3, 3), (2, 2), (0, 1, 2, 1), 2),  # row tiles, grouped, odd pads
    ],
)
def test_conv2d_paths_against_reference(threads, shape, wshape, s, p, group) -> None:
    x = _rand(*shape)
    w = _rand(*wshape, seed=1) * np.float32(0.1)
    b = _rand(wshape[0], seed=2)
    want, out_hw = _reference(x, w, b, s, p, (1, 1), group)
    got = conv2d(x, w, b, s, p[:2], (1, 1), group, out_hw, ACT["Clip"], -1.0, 1.0)
    np.testing.assert_allclose(got, np.clip(want, -1, 1), rtol=1e-4, atol=1e-4)
    z = _rand(*want.shape, seed=3)
    got = conv2d(x, w, None, s, p[:2], (1, 1), group, out_hw, 0, z=z)
    want_z = want - b[None, :, None, None] + z
    np.testing.assert_allclose(got, want_z, rtol=1e-4, atol=1e-4)


def test_fused_conv_geometry_cache_keys_on_attributes() -> None:
    """Same shapes, different pads / auto_pad / strides: each call gets its own geometry."""
    x = _rand(1, 3, 9, 9)
    w = _rand(3, 1, 3, 3, seed=1)
    variants = [
        {"pads": (1, 1, 1, 1)},
        {"pads": (0, 0, 0, 0)},
        {"pads": (2, 0, 0, 2)},
        {"auto_pad": "SAME_UPPER"},
        {"auto_pad": "SAME_LOWER", "strides": (2, 2)},
        {"pads": (1, 1, 1, 1), "strides": (2, 2)},
    ]
    for _ in range(2):  # the second round hits the cache
        for attrs in variants:
            kw = dict(attrs)
            s = kw.get("strides", (1, 1))
            if "auto_pad" in kw:
                total = [max(0, (-(-9 // st) - 1) * st + 3 - 9) for st in s]
                lo = [t // 2 if kw["auto_pad"] == "SAME_UPPER" else t - t // 2 for t in total]
                p = (lo[0], lo[1], total[0] - lo[0], total[1] - lo[1])
            else:
                p = kw["pads"]
            want, _ = _reference(x, w, None, s, p, (1, 1), 3)
            got = fused_conv(x, w, group=3, kernel_shape=(3, 3), **kw)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(attrs))


@pytest.mark.parametrize("mg, c, p", [(96, 24, 3136), (1280, 320, 49), (16, 32, 12544)])
@pytest.mark.parametrize(
    "has_b, has_z, act", [(0, 0, 0), (1, 0, "Relu"), (1, 1, "Relu"), (0, 1, 0)]
)
def test_pointwise_gemm_job_bias_per_channel_and_residual(threads, mg, c, p, has_b, has_z, act):
    """1x1 convs big enough for the pool run as native GEMM jobs (split over pixels
    when they outnumber the channels, else over channels): bias per output channel,
    the residual, the activation, against float64 numpy."""
    from onnxexec.kernels.conv.conv_gemm import pointwise as _pointwise

    w, x = _rand(mg, c, seed=1), _rand(c, p, seed=2)
    b = _rand(mg, seed=3) if has_b else None
    z = _rand(mg, p, seed=4) if has_z else None
    y = np.full((mg, p), np.nan, np.float32)
    _pointwise(w, x, y, b, z, ACT[act] if act else 0, 0.0, 0.0)
    want = w.astype(np.float64) @ x
    if has_b:
        want += b[:, None]
    if has_z:
        want += z
    if act:
        want = np.maximum(want, 0.0)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
