"""Vectorizable float32 math for numba kernels: exp, erf, tanh without libm calls.

numba turns math.exp / math.erf into scalar libm calls, which LLVM cannot vectorize
(math.erf ran at ~70 ns an element). These use only multiply-add, min/max, division
and an integer shift, so loops over them compile to AVX2:

- exp: Cephes expf (range reduction by ln 2, degree-6 polynomial, exponent bits);
  max relative error ~2.5e-7 on [-87, 88].
- erf: Eigen's generic_fast_erf_float rational approximation on [-4, 4] (clamped
  beyond, where float32 erf is +-1); max absolute error ~4e-7.
- tanh: Eigen's generic_fast_tanh_float rational approximation, clamped at +-7.9.

The exponent trick needs an int32 scratch row (`exp_row`); erf and tanh are scalar
inline functions. Reference: test_vmath_against_math in
tests/unit/kernels/test_fused_kernels.py compares each with math.exp / math.erf /
math.tanh.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb

f32 = np.float32
# the largest float32 x with a finite exp(x) (log of float32 max, rounded down)
_EXP_MAX: Final = np.float32(88.72283935546875)
_TWO_M64: Final = np.float32(2.0**-64)


@nb.njit(inline="always", cache=True)
def erf32(x):
    x = min(max(x, f32(-4.0)), f32(4.0))
    x2 = x * x
    p = f32(-2.72614225801306e-10)
    p = p * x2 + f32(2.77068142495902e-08)
    p = p * x2 + f32(-2.10102402082508e-06)
    p = p * x2 + f32(-5.69250639462346e-05)
    p = p * x2 + f32(-7.34990630326855e-04)
    p = p * x2 + f32(-2.95459980854025e-03)
    p = p * x2 + f32(-1.60960333262415e-02)
    q = f32(-1.45660718464996e-05)
    q = q * x2 + f32(-2.13374055278905e-04)
    q = q * x2 + f32(-1.68282697438203e-03)
    q = q * x2 + f32(-7.37332916720468e-03)
    q = q * x2 + f32(-1.42647390514189e-02)
    return x * p / q


@nb.njit(inline="always", cache=True)
def tanh32(x):
    x = min(max(x, f32(-7.90531110763549805)), f32(7.90531110763549805))
    x2 = x * x
    p = f32(-2.76076847742355e-16)
    p = p * x2 + f32(2.00018790482477e-13)
    p = p * x2 + f32(-8.60467152213735e-11)
    p = p * x2 + f32(5.12229709037114e-08)
    p = p * x2 + f32(1.48572235717979e-05)
    p = p * x2 + f32(6.37261928875436e-04)
    p = p * x2 + f32(4.89352455891786e-03)
    q = f32(1.19825839466702e-06)
    q = q * x2 + f32(1.18534705686654e-04)
    q = q * x2 + f32(2.26843463243900e-03)
    q = q * x2 + f32(4.89352518554385e-03)
    return x * p / q


@nb.njit(inline="always", cache=True)
def exp_row(src, dst, scratch):
    """dst[i] = exp(src[i]) over 1-D float32 rows; scratch is an int32 row as long.

    src and dst may be the same array. As numpy's exp: subnormal results down to
    exp(-103.97), 0 below (and for -inf), inf above log(float32 max), NaN for NaN.
    """
    n = src.shape[0]
    for i in range(n):
        v0 = src[i]
        v = min(max(v0, f32(-104.0)), _EXP_MAX)
        # round(v / ln2) with the 1.5 * 2**23 trick, then v - k ln2 in two parts
        kf = (v * f32(1.4426950408889634) + f32(12582912.0)) - f32(12582912.0)
        r = v - kf * f32(0.693359375) + kf * f32(2.12194440e-4)
        p = f32(1.9875691500e-4)
        p = p * r + f32(1.3981999507e-3)
        p = p * r + f32(8.3334519073e-3)
        p = p * r + f32(4.1665795894e-2)
        p = p * r + f32(1.6666665459e-1)
        p = p * r + f32(5.0000001201e-1)
        k = np.int32(kf)
        top = np.int32(k > np.int32(127))  # 2**128 has no float32: 2 * 2**127
        low = np.int32(k < np.int32(-126))  # 2**k subnormal: 2**-64 * 2**(k + 64)
        scale = (f32(1.0) + f32(top)) * (f32(1.0) - f32(low) + f32(low) * _TWO_M64)
        dst[i] = (p * r * r + r + f32(1.0)) * scale
        bits = (k - top + np.int32(64) * low + np.int32(127)) << np.int32(23)
        bits = np.int32(0x7F800000) if v0 > _EXP_MAX else bits  # overflow: * inf
        scratch[i] = bits if v0 >= f32(-104.0) else np.int32(0)
    pow2 = scratch[:n].view(np.float32)
    for i in range(n):
        dst[i] *= pow2[i]
