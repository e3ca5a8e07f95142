"""ggml type ids and block geometry as plain `Final` ints, readable inside numba kernels.

Kernels may import only numpy and numba, and a kernel can read only true constants,
so the ids live here; `onnxexec.loaders.ggml_types.GGMLType` is built from them.
Numbering follows `enum ggml_type` in ggml/include/ggml.h.
"""

from __future__ import annotations

from typing import Final

F32: Final = 0
F16: Final = 1
Q4_0: Final = 2
Q4_1: Final = 3
Q5_0: Final = 6
Q5_1: Final = 7
Q8_0: Final = 8
Q8_1: Final = 9
Q2_K: Final = 10
Q3_K: Final = 11
Q4_K: Final = 12
Q5_K: Final = 13
Q6_K: Final = 14
Q8_K: Final = 15
IQ2_XXS: Final = 16
IQ2_XS: Final = 17
IQ3_XXS: Final = 18
IQ1_S: Final = 19
IQ4_NL: Final = 20
IQ3_S: Final = 21
IQ2_S: Final = 22
IQ4_XS: Final = 23
I8: Final = 24
I16: Final = 25
I32: Final = 26
I64: Final = 27
F64: Final = 28
IQ1_M: Final = 29
BF16: Final = 30
TQ1_0: Final = 34
TQ2_0: Final = 35
MXFP4: Final = 39
NVFP4: Final = 40
Q1_0: Final = 41

QK: Final = 32  # values per block of the *_0 / *_1 / IQ4_NL types
QK_K: Final = 256  # values per super-block of the K-quants and IQ4_XS
K_SCALE_SIZE: Final = 12  # packed 6-bit scales+mins of Q4_K / Q5_K (ggml-common.h)

# Bytes per block, from the block_* structs in ggml/src/ggml-common.h (ggml_half = 2).
Q4_0_BYTES: Final = 2 + QK // 2  # d, qs[16]
Q4_1_BYTES: Final = 2 + 2 + QK // 2  # d, m, qs[16]
Q5_0_BYTES: Final = 2 + 4 + QK // 2  # d, qh[4], qs[16]
Q5_1_BYTES: Final = 2 + 2 + 4 + QK // 2  # d, m, qh[4], qs[16]
Q8_0_BYTES: Final = 2 + QK  # d, qs[32]
IQ4_NL_BYTES: Final = 2 + QK // 2  # d, qs[16]
Q2_K_BYTES: Final = QK_K // 16 + QK_K // 4 + 2 + 2  # scales[16], qs[64], d, dmin
Q3_K_BYTES: Final = QK_K // 8 + QK_K // 4 + 12 + 2  # hmask[32], qs[64], scales[12], d
Q4_K_BYTES: Final = 2 + 2 + K_SCALE_SIZE + QK_K // 2  # d, dmin, scales[12], qs[128]
Q5_K_BYTES: Final = 2 + 2 + K_SCALE_SIZE + QK_K // 8 + QK_K // 2  # d, dmin, scales, qh, qs
Q6_K_BYTES: Final = QK_K // 2 + QK_K // 4 + QK_K // 16 + 2  # ql[128], qh[64], scales[16], d
IQ4_XS_BYTES: Final = 2 + 2 + QK_K // 64 + QK_K // 2  # d, scales_h, scales_l[4], qs[128]

_NAMES: Final = {  # id -> name, for messages
    v: k
    for k, v in dict(globals()).items()
    if isinstance(v, int) and k.isupper() and "QK" not in k and not k.endswith(("_BYTES", "_SIZE"))
}


def type_name(ggml_type: int) -> str:
    """'Q4_K' for 12; 'ggml type 99' for ids ggml does not define."""
    return _NAMES.get(int(ggml_type), f"ggml type {int(ggml_type)}")
