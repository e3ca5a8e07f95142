"""Activations quantized as onnxruntime's MatMulNBits accuracy_level 4 (CompInt8) does.

MLAS QuantizeARow_CompInt8 (onnxruntime/core/mlas/lib/sqnbitgemm*.cpp): per row and
block of `block` values along K (the MatMulNBits block_size), amax = max|x|, scale =
amax / 127 kept in float32 (not half, unlike ggml's Q8_0 / Q8_1), q = round-to-even
(x * (127 / amax)), 0 for an all-zero block. The result is laid out as
actquant.quantize_act's (xq, xst) so kernels/quant's int8 matvec kernels read it: a
64 or 128 block gives 2 or 4 ggml blocks of 32 that share its scale.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.qtypes import QK


@nb.njit(cache=True, nogil=True)
def _quantize_blocks(x, block, xq, xst):
    t_rows, k = x.shape
    for t in range(t_rows):
        for b0 in range(0, k, block):
            amax = np.float32(0.0)
            for j in range(b0, b0 + block):
                amax = max(amax, abs(x[t, j]))
            scale = np.float32(amax / np.float32(127.0))
            inv = np.float32(127.0) / amax if amax > 0 else np.float32(0.0)
            for sub in range(b0 // QK, (b0 + block) // QK):
                total = 0
                for j in range(sub * QK, sub * QK + QK):
                    v = np.rint(x[t, j] * inv)
                    # |v| <= 127 for finite x; the clamp keeps NaN / inf input from
                    # overflowing the kernels' int16 sums
                    if not v >= -127.0:
                        v = np.float32(-127.0)
                    elif v > 127.0:
                        v = np.float32(127.0)
                    iv = np.int64(v)
                    xq[t, j] = iv
                    total += iv
                xst[t, 0, sub] = scale
                xst[t, 1, sub] = scale * np.float32(total)
                xst[t, 2, sub] = np.float32(total)


def quantize_act_blocks(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """x (T, K) float32 -> xq (T, K) int16, xst (T, 3, K/32) float32 (scale,
    scale * sum q, sum q per 32 values), quantized per `block` values as MLAS does.

    block: a multiple of 32 dividing K (ValueError otherwise)."""
    t_rows, k = x.shape
    if block % QK or k % block:
        raise ValueError(
            f"quantize_act_blocks: block {block} must be a multiple of 32 dividing K {k}"
        )
    if not (x.dtype == np.float32 and x.flags.c_contiguous):
        x = np.ascontiguousarray(x, dtype=np.float32)
    xq = np.empty((t_rows, k), np.int16)
    xst = np.empty((t_rows, 3, k // QK), np.float32)
    _quantize_blocks(x, block, xq, xst)
    return xq, xst
