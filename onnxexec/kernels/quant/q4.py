"""Q4_0 / Q4_1 blocks (32 values) -> float32, bit-exact with gguf-py.

block_q4_0 {half d; u8 qs[16]} and block_q4_1 {half d, m; u8 qs[16]} in
ggml/src/ggml-common.h. Byte j of qs holds value j in its low nibble and value
j + 16 in its high nibble (dequantize_row_q4_0 in ggml/src/ggml-quants.c).
Q4_0: v = d * (q - 8). Q4_1: v = d * q + m (two float32 roundings, as gguf-py).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.qtypes import Q4_0_BYTES, Q4_1_BYTES, QK


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q4_0(raw, out):
    """raw (n_blocks*18,) u8 -> out (n_blocks*32,) f32."""
    for ib in nb.prange(out.shape[0] // QK):
        o = ib * Q4_0_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        base = ib * QK
        for j in range(QK // 2):
            v = np.int32(raw[o + 2 + j])
            out[base + j] = d * np.float32((v & 0xF) - 8)
            out[base + j + 16] = d * np.float32((v >> 4) - 8)


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q4_1(raw, out):
    """raw (n_blocks*20,) u8 -> out (n_blocks*32,) f32."""
    for ib in nb.prange(out.shape[0] // QK):
        o = ib * Q4_1_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        m = f16_to_f32(raw[o + 2], raw[o + 3])
        base = ib * QK
        for j in range(QK // 2):
            v = np.int32(raw[o + 4 + j])
            out[base + j] = d * np.float32(v & 0xF) + m
            out[base + j + 16] = d * np.float32(v >> 4) + m
