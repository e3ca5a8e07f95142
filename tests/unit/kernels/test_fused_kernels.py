"""The fused-op kernels (vmath, activations, gemm, norms, mha, conv2d, parallel) against
independent float64 numpy / math references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.attn.mha import attention, attention_reference
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.linalg.gemm import batched, linear
from onnxexec.kernels.math.activations import epilogue, epilogue_reference
from onnxexec.kernels.math.norms import layer_norm, layer_norm_reference
from onnxexec.kernels.math.vmath import erf32, exp_row, tanh32
from onnxexec.native import parallel


def _rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = parallel.num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)


def test_vmath_against_math() -> None:
    x = np.append(np.linspace(-110, 90, 2001), [-np.inf, np.inf]).astype(np.float32)
    out = np.empty_like(x)
    exp_row(x, out, np.empty(x.size, np.int32))
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(np.float64))
    ok = (x > -87) & (x < 88.72)
    np.testing.assert_allclose(out[ok], ref[ok], rtol=1e-6)
    # as numpy's float32 exp: subnormal results, then exactly 0 (masked softmax
    # entries, -inf included); inf past log(float32 max)
    sub = (x > -103) & (x <= -87)
    np.testing.assert_allclose(out[sub], ref[sub].astype(np.float32), rtol=1e-4, atol=3e-45)
    assert np.all(out[x < -104] == 0) and np.all(out[x > 88.723] == np.inf)
    z = np.linspace(-6, 6, 1201, dtype=np.float32)
    np.testing.assert_allclose([erf32(v) for v in z], [math.erf(v) for v in z], atol=5e-7)
    np.testing.assert_allclose([tanh32(v) for v in z], np.tanh(z.astype(np.float64)), atol=5e-7)


@pytest.mark.parametrize("name", sorted(ACT))
def test_epilogue_activations(name: str) -> None:
    y = _rand(5, 40, scale=4)
    b = _rand(40, seed=1)
    alpha, beta = (-1.0, 2.0) if name == "Clip" else (0.2, 0.5)
    z = y.copy()
    epilogue(z, 0, 40, b, ACT[name], alpha, beta)
    v = y.astype(np.float64) + b  # written out independently of epilogue_reference
    erf = np.vectorize(math.erf)
    want = {
        "": v,
        "Relu": np.maximum(v, 0),
        "Gelu": 0.5 * v * (1 + erf(v / math.sqrt(2))),
        "GeluTanh": 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
        "Sigmoid": 1 / (1 + np.exp(-v)),
        "Silu": v / (1 + np.exp(-v)),
        "HardSwish": v * np.clip(v / 6 + 0.5, 0, 1),
        "Clip": np.clip(v, -1, 2),
        "LeakyRelu": np.where(v >= 0, v, 0.2 * v),
        "Tanh": np.tanh(v),
        "HardSigmoid": np.clip(0.2 * v + 0.5, 0, 1),
    }[name]
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(
        epilogue_reference(y, b, ACT[name], alpha, beta), want, rtol=1e-5, atol=2e-6
    )


def test_row_bias_epilogue_on_column_slab() -> None:
    y = _rand(3, 10)
    b = _rand(3, seed=2)
    z = y.copy()
    epilogue(z, 2, 7, b, ACT["Relu"], row_bias=True)
    want = y.copy()
    want[:, 2:7] = np.maximum(y[:, 2:7] + b[:, None], 0)
    np.testing.assert_allclose(z, want, rtol=1e-6)


@pytest.mark.parametrize("name", ["", "Relu", "Clip", "LeakyRelu", "Tanh"])
@pytest.mark.parametrize("bias", ["none", "row", "col"])
@pytest.mark.parametrize("has_z", [False, True])
def test_epilogue_bias_residual_combinations(name: str, bias: str, has_z: bool) -> None:
    """The one-pass loop (compare-only activations) and the two-pass one agree with
    numpy for every bias kind, with and without the residual, on a column slab."""
    y = _rand(4, 13, scale=3)
    b = {"none": None, "row": _rand(4, seed=1), "col": _rand(13, seed=1)}[bias]
    zz = _rand(4, 13, seed=2) if has_z else None
    alpha, beta = (-0.5, 1.0) if name == "Clip" else (0.1, 0.0)
    got = y.copy()
    epilogue(got, 3, 11, b, ACT[name], alpha, beta, row_bias=bias == "row", z=zz)
    v = y[:, 3:11].astype(np.float64)
    if bias == "row":
        v = v + b[:, None]
    elif bias == "col":
        v = v + b[3:11]
    if has_z:
        v = v + zz[:, 3:11]
    act = {
        "": v,
        "Relu": np.maximum(v, 0),
        "Clip": np.clip(v, -0.5, 1.0),
        "LeakyRelu": np.where(v >= 0, v, 0.1 * v),
        "Tanh": np.tanh(v),
    }[name]
    want = y.copy()
    want[:, 3:11] = act
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)


def test_linear_and_batched(threads) -> None:
    x = _rand(2, 70, 64)
    w = _rand(96, 64, seed=1)
    b = _rand(96, seed=2)
    got = linear(x, w.T, b, ACT["Relu"])
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    a, c = _rand(2, 3, 40, 32, seed=3), _rand(1, 3, 32, 50, seed=4)
    np.testing.assert_allclose(batched(a, c), a.astype(np.float64) @ c, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_with_skip(threads, rms: bool) -> None:
    x, skip = _rand(3, 9, 48, scale=3), _rand(9, 48, seed=1)
    g, b, sb = _rand(48, seed=2), _rand(48, seed=3), _rand(48, seed=4)
    y, s = layer_norm(x, g, None if rms else b, skip, sb, 1e-5, rms, keep_sum=True)
    total = x.astype(np.float64) + skip + sb
    c = total if rms else total - total.mean(-1, keepdims=True)
    want = c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * g + (0 if rms else b)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, total, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        layer_norm_reference(x, g, None if rms else b, skip, sb, 1e-5, rms),
        want,
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("hkv", [4, 2, 1])
def test_attention_gqa_and_masks(threads, hkv: int) -> None:
    q = _rand(2, 4, 6, 8)
    kt = _rand(2, hkv, 8, 7, seed=1)
    v = _rand(2, hkv, 7, 5, seed=2)
    mask = np.where(np.random.default_rng(3).random((2, 1, 6, 7)) < 0.3, -np.inf, 0.0)
    mask[1, 0, 4] = -np.inf
    mask = mask.astype(np.float32)
    got = attention(q, kt, v, mask, 0.3, True)
    rep = 4 // hkv
    k64 = np.repeat(kt.astype(np.float64), rep, axis=1)
    s = q.astype(np.float64) @ k64 * 0.3 + mask
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
    want = np.nan_to_num(p) @ np.repeat(v.astype(np.float64), rep, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isnan(attention(q, kt, v, mask, 0.3, False)[1, :, 4]).all()
    np.testing.assert_allclose(
        attention_reference(q, kt, v, mask, 0.3, True), want, rtol=1e-5, atol=1e-5
    )


def _conv_naive(x, w, b, s, p, d, group):
    n, _, h, wd = x.shape
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
        y[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, a, bb])
    return y + b[None, :, None, None], (oh, ow)


@pytest.mark.parametrize(
    "shape,wshape,s,p,d,group",
    [
        ((1, 6, 9, 11), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),  # depthwise
        ((2, 4, 10, 9), (8, 1, 3, 3), (2, 2), (1, 0, 1, 2), (1, 1), 4),  # depthwise x2, stride 2
        ((1, 3, 7, 8), (3, 1, 3, 2), (2, 1), (0, 1, 1, 0), (2, 1), 3),  # depthwise, mixed
        ((1, 5, 8, 8), (7, 5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # pointwise
        ((1, 5, 8, 8), (7, 5, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),  # strided 1x1
        ((2, 3, 12, 10), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # im2col
        ((1, 6, 11, 9), (4, 3, 3, 2), (2, 1), (2, 0, 1, 1), (1, 2), 2),  # grouped, dilated
    ],
)
def test_conv2d_against_naive(threads, shape, wshape, s, p, d, group) -> None:
    x = _rand(*shape)
    w = _rand(*wshape, seed=1)
    b = _rand(wshape[0], seed=2)
    want, out_hw = _conv_naive(x, w, b, s, p, d, group)
    got = conv2d(x, w, b, s, p[:2], d, group, out_hw, ACT["Relu"])
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-4, atol=1e-4)
    z = _rand(*want.shape, seed=5)  # residual added before the activation
    got = conv2d(x, w, None, s, p[:2], d, group, out_hw, ACT["Relu"], z=z)
    np.testing.assert_allclose(
        got, np.maximum(want - b[None, :, None, None] + z, 0), rtol=1e-4, atol=1e-4
    )


def test_parallel_for_covers_every_item_once(threads) -> None:
    seen = np.zeros(103, dtype=np.int64)

    def mark(a: int, b: int) -> None:
        seen[a:b] += 1

    parallel.parallel_for(mark, 103)
    assert np.all(seen == 1)

    def boom(a: int, b: int) -> None:
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        parallel.parallel_for(boom, 50)
