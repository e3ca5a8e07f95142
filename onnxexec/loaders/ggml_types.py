"""ggml tensor types: ids (`GGMLType`) and block geometry (`BLOCK`).

Ids follow `enum ggml_type` in ggml/include/ggml.h (gaps are types ggml removed).
`BLOCK[t] = (values per block, bytes per block)`; the bytes are the fields of the
matching `block_*` struct in ggml/src/ggml-common.h, written out in field order
(`ggml_half` = 2 bytes, QK_K = 256). The table must agree with gguf-py's
GGML_QUANT_SIZES; tests/unit/loaders/test_gguf_reader.py checks that.
"""

from __future__ import annotations

from enum import IntEnum

from onnxexec.kernels.quant import qtypes as q

QK_K = q.QK_K


class GGMLType(IntEnum):
    """A ggml tensor type id, as stored in a GGUF tensor-info record."""

    F32 = q.F32
    F16 = q.F16
    Q4_0 = q.Q4_0
    Q4_1 = q.Q4_1
    Q5_0 = q.Q5_0
    Q5_1 = q.Q5_1
    Q8_0 = q.Q8_0
    Q8_1 = q.Q8_1
    Q2_K = q.Q2_K
    Q3_K = q.Q3_K
    Q4_K = q.Q4_K
    Q5_K = q.Q5_K
    Q6_K = q.Q6_K
    Q8_K = q.Q8_K
    IQ2_XXS = q.IQ2_XXS
    IQ2_XS = q.IQ2_XS
    IQ3_XXS = q.IQ3_XXS
    IQ1_S = q.IQ1_S
    IQ4_NL = q.IQ4_NL
    IQ3_S = q.IQ3_S
    IQ2_S = q.IQ2_S
    IQ4_XS = q.IQ4_XS
    I8 = q.I8
    I16 = q.I16
    I32 = q.I32
    I64 = q.I64
    F64 = q.F64
    IQ1_M = q.IQ1_M
    BF16 = q.BF16
    TQ1_0 = q.TQ1_0
    TQ2_0 = q.TQ2_0
    MXFP4 = q.MXFP4
    NVFP4 = q.NVFP4
    Q1_0 = q.Q1_0


T = GGMLType
BLOCK: dict[GGMLType, tuple[int, int]] = {
    T.F32: (1, 4),
    T.F16: (1, 2),
    T.BF16: (1, 2),
    T.F64: (1, 8),
    T.I8: (1, 1),
    T.I16: (1, 2),
    T.I32: (1, 4),
    T.I64: (1, 8),
    # block_q4_0 {half d; u8 qs[16]}
    T.Q4_0: (32, 2 + 16),
    # block_q4_1 {half d, m; u8 qs[16]}
    T.Q4_1: (32, 2 + 2 + 16),
    # block_q5_0 {half d; u8 qh[4]; u8 qs[16]}
    T.Q5_0: (32, 2 + 4 + 16),
    # block_q5_1 {half d, m; u8 qh[4]; u8 qs[16]}
    T.Q5_1: (32, 2 + 2 + 4 + 16),
    # block_q8_0 {half d; i8 qs[32]}
    T.Q8_0: (32, 2 + 32),
    # block_q8_1 {half d, s; i8 qs[32]}
    T.Q8_1: (32, 2 + 2 + 32),
    # block_q2_K {u8 scales[QK_K/16]; u8 qs[QK_K/4]; half d, dmin}
    T.Q2_K: (QK_K, QK_K // 16 + QK_K // 4 + 2 + 2),
    # block_q3_K {u8 hmask[QK_K/8]; u8 qs[QK_K/4]; u8 scales[12]; half d}
    T.Q3_K: (QK_K, QK_K // 8 + QK_K // 4 + 12 + 2),
    # block_q4_K {half d, dmin; u8 scales[12]; u8 qs[QK_K/2]}
    T.Q4_K: (QK_K, 2 + 2 + 12 + QK_K // 2),
    # block_q5_K {half d, dmin; u8 scales[12]; u8 qh[QK_K/8]; u8 qs[QK_K/2]}
    T.Q5_K: (QK_K, 2 + 2 + 12 + QK_K // 8 + QK_K // 2),
    # block_q6_K {u8 ql[QK_K/2]; u8 qh[QK_K/4]; i8 scales[QK_K/16]; half d}
    T.Q6_K: (QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + 2),
    # block_q8_K {float d; i8 qs[QK_K]; i16 bsums[QK_K/16]}
    T.Q8_K: (QK_K, 4 + QK_K + 2 * (QK_K // 16)),
    # block_iq2_xxs {half d; u16 qs[QK_K/8]}
    T.IQ2_XXS: (QK_K, 2 + 2 * (QK_K // 8)),
    # block_iq2_xs {half d; u16 qs[QK_K/8]; u8 scales[QK_K/32]}
    T.IQ2_XS: (QK_K, 2 + 2 * (QK_K // 8) + QK_K // 32),
    # block_iq3_xxs {half d; u8 qs[3*QK_K/8]}
    T.IQ3_XXS: (QK_K, 2 + 3 * (QK_K // 8)),
    # block_iq1_s {half d; u8 qs[QK_K/8]; u16 qh[QK_K/32]}
    T.IQ1_S: (QK_K, 2 + QK_K // 8 + QK_K // 16),
    # block_iq4_nl {half d; u8 qs[16]}
    T.IQ4_NL: (32, 2 + 16),
    # block_iq3_s {half d; u8 qs[QK_K/4]; u8 qh[QK_K/32]; u8 signs[QK_K/8]; u8 scales[4]}
    T.IQ3_S: (QK_K, 2 + QK_K // 4 + QK_K // 32 + QK_K // 8 + 4),
    # block_iq2_s {half d; u8 qs[QK_K/4]; u8 qh[QK_K/32]; u8 scales[QK_K/32]}
    T.IQ2_S: (QK_K, 2 + QK_K // 4 + QK_K // 32 + QK_K // 32),
    # block_iq4_xs {half d; u16 scales_h; u8 scales_l[QK_K/64]; u8 qs[QK_K/2]}
    T.IQ4_XS: (QK_K, 2 + 2 + QK_K // 64 + QK_K // 2),
    # block_iq1_m {u8 qs[QK_K/8]; u8 qh[QK_K/16]; u8 scales[QK_K/32]}
    T.IQ1_M: (QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    # block_tq1_0 {u8 qs[(QK_K - 4*QK_K/64)/5]; u8 qh[QK_K/64]; half d}
    T.TQ1_0: (QK_K, (QK_K - 4 * QK_K // 64) // 5 + QK_K // 64 + 2),
    # block_tq2_0 {u8 qs[QK_K/4]; half d}
    T.TQ2_0: (QK_K, QK_K // 4 + 2),
    # block_mxfp4 {u8 e (E8M0); u8 qs[16]}
    T.MXFP4: (32, 1 + 16),
    # block_nvfp4 {u8 d[4] (UE4M3, one per 16 values); u8 qs[32]}
    T.NVFP4: (64, 4 + 32),
    # block_q1_0 {half d; u8 qs[128/8]}
    T.Q1_0: (128, 2 + 16),
}
del T


def row_bytes(ggml_type: GGMLType, n_values: int) -> int:
    """Bytes holding `n_values` consecutive values (a multiple of the block size)."""
    block, size = BLOCK[ggml_type]
    if n_values % block:
        raise ValueError(
            f"{ggml_type.name}: {n_values} values is not a multiple of the block size {block}"
        )
    return n_values // block * size


def tensor_bytes(ggml_type: GGMLType, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of numpy-order `shape` (rows of shape[-1] values)."""
    n_rows = 1
    for s in shape[:-1]:
        n_rows *= s
    return n_rows * row_bytes(ggml_type, shape[-1] if shape else 1)
