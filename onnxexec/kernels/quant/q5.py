"""Q5_0 / Q5_1 blocks (32 values) -> float32, bit-exact with gguf-py.

block_q5_0 {half d; u8 qh[4]; u8 qs[16]} and block_q5_1 {half d, m; u8 qh[4];
u8 qs[16]} in ggml/src/ggml-common.h. The low 4 bits are packed as in Q4_0 (byte j:
value j low nibble, value j + 16 high nibble); bit i of the little-endian u32 qh is
bit 4 of value i (dequantize_row_q5_0 in ggml/src/ggml-quants.c).
Q5_0: v = d * (q - 16). Q5_1: v = d * q + m.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.qtypes import Q5_0_BYTES, Q5_1_BYTES, QK


@nb.njit(cache=True, nogil=True, inline="always")
def read_u32(raw, o):
    """Little-endian u32 at byte offset o (as int64)."""
    return (
        np.int64(raw[o])
        | (np.int64(raw[o + 1]) << 8)
        | (np.int64(raw[o + 2]) << 16)
        | (np.int64(raw[o + 3]) << 24)
    )


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q5_0(raw, out):
    """raw (n_blocks*22,) u8 -> out (n_blocks*32,) f32."""
    for ib in nb.prange(out.shape[0] // QK):
        o = ib * Q5_0_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        qh = read_u32(raw, o + 2)
        base = ib * QK
        for j in range(QK // 2):
            v = np.int32(raw[o + 6 + j])
            lo = (v & 0xF) | np.int32(((qh >> j) & 1) << 4)
            hi = (v >> 4) | np.int32(((qh >> (j + 16)) & 1) << 4)
            out[base + j] = d * np.float32(lo - 16)
            out[base + j + 16] = d * np.float32(hi - 16)


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q5_1(raw, out):
    """raw (n_blocks*24,) u8 -> out (n_blocks*32,) f32."""
    for ib in nb.prange(out.shape[0] // QK):
        o = ib * Q5_1_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        m = f16_to_f32(raw[o + 2], raw[o + 3])
        qh = read_u32(raw, o + 4)
        base = ib * QK
        for j in range(QK // 2):
            v = np.int32(raw[o + 8 + j])
            lo = (v & 0xF) | np.int32(((qh >> j) & 1) << 4)
            hi = (v >> 4) | np.int32(((qh >> (j + 16)) & 1) << 4)
            out[base + j] = d * np.float32(lo) + m
            out[base + j + 16] = d * np.float32(hi) + m
