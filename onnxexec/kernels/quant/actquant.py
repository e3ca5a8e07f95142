"""Activation rows -> int8 blocks of 32 (ggml's Q8_0 / Q8_1), as llama.cpp does on x86.

llama.cpp never multiplies quantized weights by float activations: it first quantizes
each activation row to the weight type's `vec_dot_type` and takes integer dot products
(ggml-cpu.c type_traits_cpu). This module reproduces the AVX2 quantize_row_q8_0 /
quantize_row_q8_1 (ggml/src/ggml-cpu/arch/x86/quants.c): per block of 32,
amax = max|x|, d = amax / 127 stored as half, q = rint(x * (127 / amax)) with ties to
even, and for Q8_1 s = half(d * sum(q)). The int8 values are returned as int16, the
width the kernels multiply in (products of a weight quant and an activation quant
fit, and the kernels size their partial sums so they never overflow).

One deviation: llama.cpp quantizes activations for K-quant weights (Q4_K, Q5_K, Q6_K)
to Q8_K (one float scale per 256 values); we use the same 32-value blocks for every
type, which is slightly more accurate and keeps a single activation format.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.fp16 import round_to_f16
from onnxexec.kernels.quant.qtypes import QK


@nb.njit(cache=True, nogil=True)
def quantize_act(x):
    """x (T, K) f32 -> xq (T, K) i16 in [-127, 127], xst (T, 3, K/32) f32.

    xst[:, 0] = half(d) (the Q8 scale), xst[:, 1] = half(d * sum q) (Q8_1's s),
    xst[:, 2] = sum q (exact). Serial: called at the start of each matvec kernel.
    """
    xq = np.empty(x.shape, np.int16)
    xst = np.empty((x.shape[0], 3, x.shape[1] // QK), np.float32)
    quantize_act_into(x, xq, xst)
    return xq, xst


@nb.njit(cache=True, nogil=True)
def quantize_act8(x):
    """quantize_act with the values as int8 (T, K), the width of the AVX2 kernels."""
    xq = np.empty(x.shape, np.int8)
    xst = np.empty((x.shape[0], 3, x.shape[1] // QK), np.float32)
    quantize_act_into(x, xq, xst)
    return xq, xst


@nb.njit(cache=True, nogil=True)
def quantize_act_into(x, xq, xst):
    """quantize_act of x (T, K) into xq (T, K) (int8 or int16) and xst (T, 3, K/32)."""
    T, K = x.shape
    n_blocks = K // QK
    for t in range(T):
        for b in range(n_blocks):
            o = b * QK
            amax = np.float32(0.0)
            for j in range(QK):
                amax = max(amax, abs(x[t, o + j]))
            d = amax / np.float32(127.0)
            inv = np.float32(127.0) / amax if amax > 0 else np.float32(0.0)
            total = 0
            for j in range(QK):
                v = np.rint(x[t, o + j] * inv)
                # |v| <= 127 for finite x; the clamp also keeps NaN/inf input from
                # overflowing the kernels' int16 sums
                if not v >= -127.0:
                    v = np.float32(-127.0)
                elif v > 127.0:
                    v = np.float32(127.0)
                iv = np.int64(v)
                xq[t, o + j] = iv
                total += iv
            xst[t, 0, b] = round_to_f16(d)
            xst[t, 1, b] = round_to_f16(d * np.float32(total))
            xst[t, 2, b] = np.float32(total)
