"""Q8_0 blocks (32 values) -> float32, bit-exact with gguf-py.

block_q8_0 {half d; i8 qs[32]} in ggml/src/ggml-common.h; v = q * d.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.qtypes import Q8_0_BYTES, QK


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_q8_0(raw, out):
    """raw (n_blocks*34,) u8 -> out (n_blocks*32,) f32."""
    q = raw.view(np.int8)
    for ib in nb.prange(out.shape[0] // QK):
        o = ib * Q8_0_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        base = ib * QK
        for j in range(QK):
            out[base + j] = np.float32(q[o + 2 + j]) * d
