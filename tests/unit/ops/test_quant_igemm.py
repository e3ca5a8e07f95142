"""The integer GEMM (kernels/linalg/igemm.py, ops/contrib/quant_igemm.py, quant_iconv.py)
against int64 / float64 numpy: exact products for every operand type, zero-point form
and ragged shape, through every tile loop the CPU allows (VNNI, AVX2, the portable
loops; the SIMD ones also bit for bit against the portable one), and the convs built
on it (through a session, so with the prepared weight)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.linalg import igemm
from onnxexec.ops.contrib.quant_igemm import PackedInt8, int8_matmul
from tests.unit.ops._node import run_node
from tests.unit.ops.test_conv import naive_conv

RNG = np.random.default_rng(23)
LOOPS = ["portable", *(["avx2"] if igemm.AVX2 else []), *(["vnni"] if igemm.VNNI else [])]
U8, S8 = np.uint8, np.int8
PAIRS = [(U8, S8), (S8, S8), (U8, U8), (S8, U8)]  # (A or x, W)


def _codes(dt: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, shape).astype(dt)


@pytest.fixture(params=LOOPS)
def loop(request, monkeypatch):
    # `tiles` picks its loop from igemm.LOOP on every call
    monkeypatch.setattr(igemm, "LOOP", request.param)
    return request.param


@pytest.mark.parametrize(
    ("m", "k", "n"), [(1, 4, 1), (7, 13, 37), (6, 64, 32), (13, 30, 65), (128, 96, 50)]
)
@pytest.mark.parametrize(("adt", "wdt"), PAIRS)
@pytest.mark.parametrize("per_column", [False, True])
def test_int8_matmul_exact(loop, m, k, n, adt, wdt, per_column):
    a, w = _codes(adt, (m, k)), _codes(wdt, (k, n))
    za = _codes(adt, ())
    zw = _codes(wdt, (n,) if per_column else (1,))
    got = int8_matmul(a, PackedInt8(w, zw), np.array(za))
    want = (a.astype(np.int64) - int(za)) @ (w.astype(np.int64) - zw.astype(np.int64))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7, 12])
def test_simd_tiles_equal_portable_tiles(m):
    # raw products on random bytes, ragged row counts (every tile height remainder),
    # two tiles of which the second is started at t0 = 1
    simd = [name for name in LOOPS if name != "portable"]
    if not simd:
        pytest.skip("no SIMD tile loop for this CPU / ONNXEXEC_ISA")
    k4s, lda, ldc = 9, 40, 3 * igemm.PAIR
    a = _codes(np.uint8, (m * lda,))
    wp = _codes(np.int8, (3 * 2 * k4s * 64,))
    want = np.full(m * ldc, 7, np.int32)
    igemm._LOOPS["portable"](a, lda, m, k4s, wp, want, ldc, 1, 3)
    for name in simd:
        got = np.full(m * ldc, 7, np.int32)
        igemm._LOOPS[name](a, lda, m, k4s, wp, got, ldc, 1, 3)
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert (want[: igemm.PAIR] == 7).all()  # tile 0 untouched


def test_extreme_codes_do_not_saturate(loop):
    # every u8 x s8 pair at 255 * -128: four-product sums (vpdpbusd) must not saturate
    # as vpmaddubsw's int16 pairs would (2 * 255 * -128 < -32768)
    k = 1000
    a = np.full((3, k), 255, np.uint8)
    w = np.full((k, 40), -128, np.int8)
    got = int8_matmul(a, PackedInt8(w, None), None)
    np.testing.assert_array_equal(got, np.full((3, 40), 255 * -128 * k))


def test_float_finish_matches_float32_scaling(loop):
    a, w = _codes(np.uint8, (5, 70)), _codes(np.int8, (70, 33))
    mult = RNG.uniform(1e-4, 1e-2, 33).astype(np.float32)
    bias = RNG.normal(size=33).astype(np.float32)
    got = int8_matmul(a, PackedInt8(w, None), np.array(7, np.uint8), mult, bias)
    acc = (a.astype(np.int64) - 7) @ w.astype(np.int64)
    want = acc.astype(np.float32) * mult + bias  # float32 steps, as the handlers
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((1, 8, 6, 6), {"pads": [1, 1, 1, 1]}),  # 3x3 im2col with pads
        ((2, 5, 7, 9), {"strides": [2, 1], "pads": [0, 2, 1, 0], "dilations": [1, 2]}),
        ((1, 16, 5, 5), {"kernel": 1}),  # 1x1: x's pixels are the rows
        ((1, 6, 9), {}),  # 1-D: numpy windows
    ],
)
@pytest.mark.parametrize(("xdt", "wdt"), PAIRS[:3])
def test_qlinear_conv_matches_float64(shape, attrs, xdt, wdt):
    attrs = dict(attrs)
    ks = attrs.pop("kernel", 3)
    nd = len(shape) - 2
    x = _codes(xdt, shape)
    w = _codes(wdt, (5, shape[1], *(ks,) * nd))
    xz, yz = _codes(xdt, ()), _codes(xdt, ())
    wz = np.zeros(5, wdt) if wdt == np.int8 else _codes(wdt, (5,))
    ws = RNG.uniform(0.001, 0.004, 5).astype(np.float32)
    bias = RNG.integers(-3000, 3000, 5).astype(np.int32)
    xs, ys = np.float32(0.05), np.float32(0.4)
    ins = [x, np.array(xs), np.array(xz), w, ws, wz, np.array(ys), np.array(yz), bias]
    (y,) = run_node("QLinearConv", ins, opset=10, **attrs)
    wc = w.astype(np.float64) - wz.astype(np.float64).reshape((-1,) + (1,) * (nd + 1))
    acc = naive_conv(x.astype(np.float64) - float(xz), wc, **attrs)
    acc += bias.reshape((1, -1) + (1,) * nd)
    mult = (xs * ws / ys).astype(np.float32).reshape((1, -1) + (1,) * nd)
    info = np.iinfo(xdt)
    want = np.clip(np.rint(acc.astype(np.float32) * mult) + float(yz), info.min, info.max)
    assert y.dtype == xdt and y.shape == want.shape
    np.testing.assert_array_equal(y.astype(np.int64), want.astype(np.int64))

    (yi,) = run_node("ConvInteger", [x, w, np.array(xz), wz], opset=10, **attrs)
    np.testing.assert_array_equal(yi, acc.astype(np.int64) - bias.reshape((1, -1) + (1,) * nd))


@pytest.mark.parametrize(
    "attrs",
    [
        {"pads": [1, 1, 1, 1]},
        {"strides": [2, 2], "pads": [0, 1, 1, 0]},
        {"dilations": [2, 1], "pads": [2, 1, 2, 1]},
        {"strides": [2, 1], "kernel": 5, "pads": [2, 2, 2, 2]},
    ],
)
@pytest.mark.parametrize(
    ("xdt", "wdt", "per_channel_zw"), [(U8, S8, True), (S8, S8, False), (U8, U8, True)]
)
def test_qlinear_conv_depthwise_matches_float64(attrs, xdt, wdt, per_channel_zw):
    # group == C == M (depthwise convs): the exact float32 depthwise path of _exact_conv
    attrs = dict(attrs)
    ks = attrs.pop("kernel", 3)
    c = 7
    x = _codes(xdt, (2, c, 9, 8))
    w = _codes(wdt, (c, 1, ks, ks))
    xz, yz = _codes(xdt, ()), _codes(xdt, ())
    wz = _codes(wdt, (c,) if per_channel_zw else ())
    ws = RNG.uniform(0.001, 0.004, c).astype(np.float32)
    bias = RNG.integers(-3000, 3000, c).astype(np.int32)
    xs, ys = np.float32(0.05), np.float32(0.2)
    ins = [x, np.array(xs), np.array(xz), w, ws, np.array(wz), np.array(ys), np.array(yz), bias]
    (y,) = run_node("QLinearConv", ins, opset=10, group=c, **attrs)
    wc = w.astype(np.float64) - np.broadcast_to(wz, (c,)).astype(np.float64).reshape(-1, 1, 1, 1)
    acc = naive_conv(x.astype(np.float64) - float(xz), wc, group=c, **attrs)
    acc += bias.reshape(1, -1, 1, 1)
    mult = (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1)
    info = np.iinfo(xdt)
    want = np.clip(np.rint(acc.astype(np.float32) * mult) + float(yz), info.min, info.max)
    assert y.dtype == xdt and y.shape == want.shape
    assert 0 < (y != info.min).mean() and (y != info.max).any()  # not all saturated
    np.testing.assert_array_equal(y.astype(np.int64), want.astype(np.int64))
