"""IEEE half conversions inside numba kernels, and F16 tensor decoding.

numba has no float16 scalar type on the CPU, so halves are decoded from their two
little-endian bytes. The conversion is exact (every half is a float32), so results
equal numpy's `.view(np.float16).astype(np.float32)` bit for bit, NaN payloads aside.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

_TWO_M24 = np.float32(2.0**-24)  # value of the smallest half subnormal


@nb.njit(cache=True, nogil=True, inline="always")
def f16_to_f32(lo, hi):
    """Half stored as bytes (lo, hi) -> float32 (exact)."""
    h = (np.int32(hi) << 8) | np.int32(lo)
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        v = np.float32(m) * _TWO_M24  # subnormal: m * 2^-24, exact
    elif e == 31:
        v = np.float32(np.inf) if m == 0 else np.float32(np.nan)
    else:
        v = np.float32(math.ldexp(np.float64(1024 + m), int(e) - 25))
    return -v if h & 0x8000 else v


@nb.njit(cache=True, nogil=True)
def round_to_f16(x):
    """float32 -> the float32 value of the nearest half (ties to even, overflow to inf).

    Matches F16C `vcvtps2ph` with round-to-nearest-even, which ggml's
    GGML_CPU_FP32_TO_FP16 uses on x86.
    """
    a = abs(np.float64(x))
    if a != a or a == np.inf:
        return np.float32(x)
    if a < 2.0**-14:
        r = np.rint(a * 2.0**24) * 2.0**-24  # subnormal halves: spacing 2^-24
    else:
        m, e = math.frexp(a)  # a = m * 2^e, m in [0.5, 1): keep 11 significant bits
        r = math.ldexp(np.rint(m * 2048.0), e - 11)
    if r > 65504.0:
        r = np.inf
    return np.float32(-r if x < 0 else r)


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_f16(raw, bits):
    """raw (2n,) u8 little-endian halves -> bits (n,) u32 of the equal float32s.

    Integer re-biasing as numpy's npy_halfbits_to_floatbits (npymath/halffloat.c);
    the caller passes a uint32 view of its float32 output.
    """
    for i in nb.prange(bits.shape[0]):
        h = (np.uint32(raw[2 * i + 1]) << np.uint32(8)) | np.uint32(raw[2 * i])
        sign = (h & np.uint32(0x8000)) << np.uint32(16)
        e = (h >> np.uint32(10)) & np.uint32(0x1F)
        m = h & np.uint32(0x3FF)
        if e == 0:
            if m == 0:
                bits[i] = sign
            else:  # subnormal half: normalize the mantissa into a float32 normal
                e32 = np.uint32(113)
                while (m & np.uint32(0x400)) == 0:
                    m <<= np.uint32(1)
                    e32 -= np.uint32(1)
                bits[i] = sign | (e32 << np.uint32(23)) | ((m & np.uint32(0x3FF)) << np.uint32(13))
        elif e == 31:
            bits[i] = sign | np.uint32(0x7F800000) | (m << np.uint32(13))
        else:
            bits[i] = sign | ((e + np.uint32(112)) << np.uint32(23)) | (m << np.uint32(13))
