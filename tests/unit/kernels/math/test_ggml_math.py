"""ggml-rounding kernels vs float64 references (bit-exactness with llama.cpp itself is
checked in tests/parity/test_llama_cpp_parity.py)."""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np
import pytest

from onnxexec.kernels.math import ggml_math as gm

RNG = np.random.default_rng(3)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 units in the last place."""
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


def expf_all(x: np.ndarray) -> np.ndarray:
    return np.array([gm.expf(np.float32(v)) for v in x], np.float32)


def test_expf_within_two_ulps_of_exp():
    x = np.concatenate([RNG.uniform(-87, 88, 4000), RNG.uniform(-1, 1, 2000)]).astype(np.float32)
    got = expf_all(x)
    want = np.exp(x.astype(np.float64)).astype(np.float32)
    assert ulps(got, want).max() <= 2  # ggml: max error 1.45 ulp + 0.5 rounding


def test_expf_edges():
    x = np.array([0.0, -np.inf, -110.0, 100.0, -100.0, -95.5], np.float32)
    got = expf_all(x)
    assert got[0] == 1.0 and got[1] == 0.0 and got[2] == 0.0 and got[3] == np.inf
    # subnormal results (n < -126 takes ggml's two-step scaling)
    want = np.exp(x[4:].astype(np.float64))
    np.testing.assert_allclose(got[4:], want, rtol=1e-3, atol=2**-149)  # denormal ulp


def test_silu_mul():
    x = (4 * RNG.standard_normal(1000)).astype(np.float32)
    g = RNG.standard_normal(1000).astype(np.float32)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(gm.silu_mul(x, g), xd / (1 + np.exp(-xd)) * g, rtol=2e-6, atol=1e-7)
    with pytest.raises(ValueError, match="float32"):
        gm.silu_mul(x, g[:10])


def test_gelu_table_is_half_rounded_gelu_of_every_half():
    table = gm.gelu_f16_table()
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    finite = np.isfinite(h) & (np.abs(h) < 10)
    with np.errstate(all="ignore"):
        want = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    want16 = want.astype(np.float16).astype(np.float32)
    assert table.dtype == np.float32 and table.shape == (65536,)
    # ggml evaluates in float32 and then rounds to half: a float32 result that lands on
    # a half rounding midpoint rounds to even, so ~1% of entries are one half-ulp away
    # from the correctly rounded value; and 1 + tanh(.) cancels in float32 for x < -4
    diff = np.abs(table[finite] - want16[finite])
    assert np.mean(diff == 0) > 0.98
    bound = np.abs(want16[finite]) * 2.0**-10 + 2.0**-24 + np.abs(h[finite]) * 2.0**-23
    assert np.all(diff <= bound)


def test_rope_cache_uses_ggml_theta_and_libm():
    cos, sin = gm.rope_cache(5, 3, 16, 10000.0, 0.5)
    ts = np.float32(np.float32(10000.0) ** np.float32(-2 / 16))
    theta = np.empty((3, 8), np.float32)
    for t in range(3):
        th = np.float32(5 + t)
        for i in range(8):
            theta[t, i] = np.float32(np.float32(0.5) * th)
            th = np.float32(th * ts)
    assert ulps(cos, np.cos(theta.astype(np.float64))).max() <= 1
    assert ulps(sin, np.sin(theta.astype(np.float64))).max() <= 1
    name = ctypes.util.find_library("m")
    if name:  # numba's float32 math.cos/sin call the C library's cosf/sinf
        libm = ctypes.CDLL(name)
        libm.cosf.restype = libm.sinf.restype = ctypes.c_float
        libm.cosf.argtypes = libm.sinf.argtypes = [ctypes.c_float]
        assert all(cos.flat[i] == libm.cosf(float(theta.flat[i])) for i in range(theta.size))
        assert all(sin.flat[i] == libm.sinf(float(theta.flat[i])) for i in range(theta.size))


@pytest.mark.parametrize("neox", [False, True])
def test_rope_rotate_is_contracted_rotation(neox):
    x = RNG.standard_normal((3, 2 * 8)).astype(np.float32)
    cos, sin = gm.rope_cache(2, 3, 6, 100.0, 1.0)
    got = gm.rope_rotate(x, cos, sin, 8, 6, neox)
    xd = x.reshape(3, 2, 8).astype(np.float64)
    want = xd.copy()
    for i in range(3):
        a, b = (i, i + 3) if neox else (2 * i, 2 * i + 1)
        c, s = cos[:, None, i].astype(np.float64), sin[:, None, i].astype(np.float64)
        x1s = (xd[..., b] * s).astype(np.float32)  # rounded product, then one fused op
        x1c = (xd[..., b] * c).astype(np.float32)
        want[..., a] = xd[..., a] * c - x1s
        want[..., b] = xd[..., a] * s + x1c
    np.testing.assert_array_equal(got, want.astype(np.float32).reshape(3, 16))


def test_softcap():
    x = (50 * RNG.standard_normal(500)).astype(np.float32)
    got = gm.softcap(x, 30.0)
    want = 30 * np.tanh(x.astype(np.float64) * np.float32(1 / 30))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
