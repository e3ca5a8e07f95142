"""Numpy references for the qmatmul kernels (dequantization's reference is gguf-py).

quantize_act_ref follows llama.cpp's AVX2 quantize_row_q8_0 / quantize_row_q8_1
(ggml/src/ggml-cpu/arch/x86/quants.c) written out with numpy: per block of 32,
d = amax / 127 stored as half, q = round-half-even(x * (127 / amax)), s = half(d * sum q).
"""

from __future__ import annotations

import numpy as np


def quantize_act_ref(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(T, K) f32 -> q (T, K) int, xd, xs, xsum (T, K/32) float32."""
    t, k = x.shape
    xb = x.astype(np.float32).reshape(t, k // 32, 32)
    amax = np.abs(xb).max(axis=-1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint(xb * inv[..., None]).astype(np.int64)  # float32 product, ties to even
    total = q.sum(axis=-1)
    xd = d.astype(np.float16).astype(np.float32)
    xs = (d * total.astype(np.float32)).astype(np.float16).astype(np.float32)
    return q.reshape(t, k), xd, xs, total.astype(np.float32)


def dequantized_activations(x: np.ndarray) -> np.ndarray:
    """x as the int8 path sees it: xd * q per block, float64."""
    q, xd, _, _ = quantize_act_ref(x)
    t, k = x.shape
    return (q.reshape(t, k // 32, 32) * xd[..., None].astype(np.float64)).reshape(t, k)
