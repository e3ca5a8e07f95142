"""Activation rows -> int8 blocks of 32 (ggml's Q8_0 / Q8_1), as llama.cpp does on x86.

llama.cpp never multiplies quantized weights by float activations: it first quantizes
each activation row to the weight type's `vec_dot_type` and takes integer dot products
(ggml-cpu.c type_traits_cpu). This module reproduces the AVX2 quantize_row_q8_0 /
quantize_row_q8_1 (ggml/src/ggml-cpu/arch/x86/quants.c): per block of 32,
amax = max|x|, d = amax / 127 stored as half, q = rint(x * (127 / amax)) with ties to
even, and for Q8_1 s = half(d * sum(q)). The int8 values are returned as float32
(exact), so kernels can take exact integer dot products with float FMAs: every
partial sum is an integer below 2**24.

One deviation: llama.cpp quantizes activations for K-quant weights (Q4_K, Q5_K, Q6_K)
to Q8_K (one float scale per 256 values); we use the same 32-value blocks for every
type, which is slightly more accurate and keeps a single activation format.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.fp16 import round_to_f16
from onnxexec.kernels.qtypes import QK


@nb.njit(parallel=True, cache=True, nogil=True)
def _quantize_rows_q8(x, xq, xd, xs, xsum):
    """x (T, K) f32 -> xq (T, K) f32 integers in [-127, 127], xd / xs / xsum (T, K/32) f32.

    xd = half(d) (the Q8 scale), xs = half(d * sum q) (Q8_1's s), xsum = sum q (exact).
    """
    T, K = x.shape
    nb_ = K // QK
    for tb in nb.prange(T * nb_):
        t = tb // nb_
        b = tb - t * nb_
        o = b * QK
        amax = np.float32(0.0)
        for j in range(QK):
            amax = max(amax, abs(x[t, o + j]))
        d = amax / np.float32(127.0)
        inv = np.float32(127.0) / amax if amax != 0 else np.float32(0.0)
        total = 0
        for j in range(QK):
            v = np.rint(x[t, o + j] * inv)
            v = min(max(v, np.float32(-128.0)), np.float32(127.0))  # packs_epi16 saturation
            xq[t, o + j] = v
            total += int(v)
        xd[t, b] = round_to_f16(d)
        xs[t, b] = round_to_f16(d * np.float32(total))
        xsum[t, b] = np.float32(total)


def quantize_rows_q8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(T, K) float32 -> (xq (T, K), xd, xs, xsum (T, K/32)), all float32; K % 32 == 0."""
    T, K = x.shape
    if K % QK:
        raise ValueError(f"activation length {K} is not a multiple of {QK}")
    xq = np.empty((T, K), np.float32)
    xd = np.empty((T, K // QK), np.float32)
    xs = np.empty_like(xd)
    xsum = np.empty_like(xd)
    _quantize_rows_q8(x, xq, xd, xs, xsum)
    return xq, xd, xs, xsum
