"""K-quant super-blocks (256 values) -> float32, bit-exact with gguf-py.

Struct layouts are block_q2_K ... block_q6_K in ggml/src/ggml-common.h; the value
order follows dequantize_row_q*_K in ggml/src/ggml-quants.c. Float32 products are
formed in gguf-py's order: (d * scale) * q - (dmin * min).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.qtypes import (
    Q2_K_BYTES,
    Q3_K_BYTES,
    Q4_K_BYTES,
    Q5_K_BYTES,
    Q6_K_BYTES,
    QK_K,
)


@nb.njit(cache=True, nogil=True, inline="always")
def scale_min_k4(raw, o, j):
    """6-bit (scale, min) of sub-block j (0..7) from the 12 packed bytes at raw[o:].

    get_scale_min_k4 in ggml-quants.c: j < 4 uses the low 6 bits of bytes j / j+4;
    j >= 4 joins a nibble of byte j+4 with the top 2 bits of bytes j-4 / j.
    """
    if j < 4:
        sc = np.int32(raw[o + j]) & 63
        mn = np.int32(raw[o + j + 4]) & 63
    else:
        sc = (np.int32(raw[o + j + 4]) & 0xF) | ((np.int32(raw[o + j - 4]) >> 6) << 4)
        mn = (np.int32(raw[o + j + 4]) >> 4) | ((np.int32(raw[o + j]) >> 6) << 4)
    return sc, mn


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q2_k(raw, out):
    """block_q2_K {u8 scales[16]; u8 qs[64]; half d, dmin}: v = d*sc*q - dmin*m."""
    for ib in nb.prange(out.shape[0] // QK_K):
        o = ib * Q2_K_BYTES
        d = f16_to_f32(raw[o + 80], raw[o + 81])
        dmin = f16_to_f32(raw[o + 82], raw[o + 83])
        for v0 in range(0, QK_K, 16):  # 16 sub-blocks of 16 values
            sc = np.int32(raw[o + v0 // 16])
            dl = d * np.float32(sc & 0xF)
            ml = dmin * np.float32(sc >> 4)
            h = v0 // 128
            shift = 2 * ((v0 % 128) // 32)
            i0 = v0 % 32
            for i in range(16):
                q = (np.int32(raw[o + 16 + h * 32 + i0 + i]) >> shift) & 3
                out[ib * QK_K + v0 + i] = dl * np.float32(q) - ml


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q3_k(raw, out):
    """block_q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d}: v = d*(s-32)*q.

    q = low 2 bits - 4 when the hmask bit is clear (the mask bit set means +0).
    """
    for ib in nb.prange(out.shape[0] // QK_K):
        o = ib * Q3_K_BYTES
        d = f16_to_f32(raw[o + 108], raw[o + 109])
        for k in range(16):  # 6-bit scales: low nibble from bytes 0..7, top 2 bits from 8..11
            lo = np.int32(raw[o + 96 + k % 8])
            lo = (lo & 0xF) if k < 8 else (lo >> 4)
            hi = (np.int32(raw[o + 96 + 8 + k % 4]) >> (2 * (k // 4))) & 3
            dl = d * np.float32((lo | (hi << 4)) - 32)
            v0 = k * 16
            h = v0 // 128
            shift = 2 * ((v0 % 128) // 32)
            bit = v0 // 32
            i0 = v0 % 32
            for i in range(16):
                ql = (np.int32(raw[o + 32 + h * 32 + i0 + i]) >> shift) & 3
                hm = (np.int32(raw[o + i0 + i]) >> bit) & 1
                out[ib * QK_K + v0 + i] = dl * np.float32(ql - ((hm ^ 1) << 2))


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q4_k(raw, out):
    """block_q4_K {half d, dmin; u8 scales[12]; u8 qs[128]}: v = (d*sc)*q - dmin*m.

    Each 32-byte run of qs holds sub-block 2c in its low and 2c+1 in its high nibbles.
    """
    for ib in nb.prange(out.shape[0] // QK_K):
        o = ib * Q4_K_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        dmin = f16_to_f32(raw[o + 2], raw[o + 3])
        for j in range(8):
            sc, mn = scale_min_k4(raw, o + 4, j)
            dl = d * np.float32(sc)
            ml = dmin * np.float32(mn)
            q0 = o + 16 + (j // 2) * 32
            shift = 4 * (j % 2)
            for i in range(32):
                q = (np.int32(raw[q0 + i]) >> shift) & 0xF
                out[ib * QK_K + j * 32 + i] = dl * np.float32(q) - ml


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q5_k(raw, out):
    """block_q5_K {half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}.

    Low nibbles as Q4_K; bit j of qh[i] is bit 4 of value i of sub-block j.
    """
    for ib in nb.prange(out.shape[0] // QK_K):
        o = ib * Q5_K_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        dmin = f16_to_f32(raw[o + 2], raw[o + 3])
        for j in range(8):
            sc, mn = scale_min_k4(raw, o + 4, j)
            dl = d * np.float32(sc)
            ml = dmin * np.float32(mn)
            q0 = o + 48 + (j // 2) * 32
            shift = 4 * (j % 2)
            for i in range(32):
                q = ((np.int32(raw[q0 + i]) >> shift) & 0xF) | (
                    ((np.int32(raw[o + 16 + i]) >> j) & 1) << 4
                )
                out[ib * QK_K + j * 32 + i] = dl * np.float32(q) - ml


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q6_k(raw, out):
    """block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d}: v = (d*s)*(q-32).

    Per 128-value half h: value r gets its low nibble from ql[64h + r%64] (nibble
    r//64) and its top 2 bits from qh[32h + r%32] (bits 2*(r//32)).
    """
    sc8 = raw.view(np.int8)
    for ib in nb.prange(out.shape[0] // QK_K):
        o = ib * Q6_K_BYTES
        d = f16_to_f32(raw[o + 208], raw[o + 209])
        for k in range(16):
            dl = d * np.float32(sc8[o + 192 + k])
            v0 = k * 16
            h = v0 // 128
            r0 = v0 % 128
            for i in range(16):
                r = r0 + i
                ql = (np.int32(raw[o + h * 64 + r % 64]) >> (4 * (r // 64))) & 0xF
                qh = (np.int32(raw[o + 128 + h * 32 + r % 32]) >> (2 * (r // 32))) & 3
                out[ib * QK_K + v0 + i] = dl * np.float32((ql | (qh << 4)) - 32)
