"""IQ4_NL (32 values) and IQ4_XS (256 values) -> float32, bit-exact with gguf-py.

Both map each 4-bit index through the non-linear table kvalues_iq4nl
(ggml/src/ggml-common.h). block_iq4_nl {half d; u8 qs[16]} packs nibbles like Q4_0;
block_iq4_xs {half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]} has eight 32-value
sub-blocks with 6-bit scales (low nibble from scales_l, top 2 bits from scales_h)
biased by 32 (dequantize_row_iq4_xs in ggml/src/ggml-quants.c).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.qtypes import IQ4_NL_BYTES, IQ4_XS_BYTES, QK, QK_K

KVALUES_IQ4NL = np.array(
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32
)


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_iq4_nl(raw, out, kvalues):
    """raw (n_blocks*18,) u8 -> out (n_blocks*32,) f32; kvalues (16,) f32."""
    for ib in nb.prange(out.shape[0] // QK):
        o = ib * IQ4_NL_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        base = ib * QK
        for j in range(QK // 2):
            v = np.int32(raw[o + 2 + j])
            out[base + j] = d * kvalues[v & 0xF]
            out[base + j + 16] = d * kvalues[v >> 4]


@nb.njit(parallel=True, cache=True, nogil=True)
def dequant_iq4_xs(raw, out, kvalues):
    """raw (n_blocks*136,) u8 -> out (n_blocks*256,) f32; kvalues (16,) f32."""
    for ib in nb.prange(out.shape[0] // QK_K):
        o = ib * IQ4_XS_BYTES
        d = f16_to_f32(raw[o], raw[o + 1])
        scales_h = np.int32(raw[o + 2]) | (np.int32(raw[o + 3]) << 8)
        for j in range(8):
            lo = (np.int32(raw[o + 4 + j // 2]) >> (4 * (j % 2))) & 0xF
            hi = (scales_h >> (2 * j)) & 3
            dl = d * np.float32((lo | (hi << 4)) - 32)
            q0 = o + 8 + j * 16
            base = ib * QK_K + j * 32
            for i in range(16):
                v = np.int32(raw[q0 + i])
                out[base + i] = dl * kvalues[v & 0xF]
                out[base + i + 16] = dl * kvalues[v >> 4]
