"""Raw GGUF blocks -> the lanes layouts of the fast kernels (numpy, once at load time).

Scales are decoded to float32 exactly as gguf-py does (half -> float32, products in
float32), so kernels that dequantize from these arrays stay bit-exact. Quants are
repacked into 32-value blocks whose byte j holds values j and j+16 (ggml's Q4_0
order); K-quants, whose 256-value super-blocks pack nibbles differently, are
re-ordered into the same form.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.math.lanes import to_lanes
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.qmv_nib import KQ, MIN, SYM


def _half(b: np.ndarray) -> np.ndarray:
    """(..., 2) u8 little-endian halves -> (...) float32."""
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float32)


def _pack_nibbles(vals: np.ndarray) -> np.ndarray:
    """(..., 32) values 0..15 -> (..., 16) bytes: byte j = vals[j] | vals[j + 16] << 4."""
    return (vals[..., :16] | (vals[..., 16:] << 4)).astype(np.uint8)


def _bit_planes(bits: np.ndarray) -> np.ndarray:
    """(..., 32) values 0/1 -> (..., 2) int16: bit j of [0] = bits[j], of [1] = bits[16 + j]."""
    w = np.left_shift(1, np.arange(16, dtype=np.int64))
    halves = bits.reshape(*bits.shape[:-1], 2, 16).astype(np.int64) @ w
    return halves.astype(np.uint16).view(np.int16)


def _scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., 12) packed 6-bit scales/mins -> two (..., 8) u8 (get_scale_min_k4)."""
    s = scales.astype(np.uint8)
    d, m, md = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = np.concatenate([d & 63, (md & 0xF) | ((d >> 6) << 4)], axis=-1)
    mn = np.concatenate([m & 63, (md >> 4) | ((m >> 6) << 4)], axis=-1)
    return sc, mn


def _kquant_nibbles(qs: np.ndarray) -> np.ndarray:
    """(..., 128) Q4_K/Q5_K qs -> (..., 8, 32) low 4 bits of the 8 sub-blocks.

    Each 32-byte run c holds sub-block 2c in its low and 2c+1 in its high nibbles.
    """
    runs = qs.reshape(*qs.shape[:-1], 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(2, 1)
    return (runs & 0xF).reshape(*qs.shape[:-1], 8, 32)


def nib_layout(raw: np.ndarray, t: int, n: int, k: int) -> dict[str, object]:
    """Arrays and kernel parameters for Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K (see qmv_nib)."""
    empty_qh = np.zeros((0, 0, 0, 0), np.int16)
    empty_u = np.zeros((1, 1, 1, 1), np.uint8)
    if t in (q.Q4_0, q.Q4_1, q.Q5_0, q.Q5_1):
        size = {
            q.Q4_0: q.Q4_0_BYTES,
            q.Q4_1: q.Q4_1_BYTES,
            q.Q5_0: q.Q5_0_BYTES,
            q.Q5_1: q.Q5_1_BYTES,
        }[t]
        blk = raw.reshape(n, k // q.QK, size)
        has_min = t in (q.Q4_1, q.Q5_1)
        o = 4 if has_min else 2
        fsc = [_half(blk[..., 0:2])] + ([_half(blk[..., 2:4])] if has_min else [])
        qh = empty_qh
        if t in (q.Q5_0, q.Q5_1):
            word = np.ascontiguousarray(blk[..., o : o + 4]).view("<u4")[..., 0]
            qh = to_lanes(_bit_planes((word[..., None] >> np.arange(32, dtype=np.uint32)) & 1))
            o += 4
        return {
            "qs": to_lanes(np.ascontiguousarray(blk[..., o : o + 16])),
            "qh": qh,
            "fsc": to_lanes(np.stack(fsc, axis=-1)),
            "usc": empty_u,
            "kind": MIN if has_min else SYM,
            "off": 0 if has_min else (8 if t == q.Q4_0 else 16),
        }
    size = q.Q4_K_BYTES if t == q.Q4_K else q.Q5_K_BYTES
    nsb = k // q.QK_K
    blk = raw.reshape(n, nsb, size)
    sc, mn = _scale_min_k4(blk[..., 4:16])  # (n, nsb, 8)
    if t == q.Q4_K:
        low = _kquant_nibbles(blk[..., 16:144])
        qh = empty_qh
    else:
        low = _kquant_nibbles(blk[..., 48:176])
        hbits = (blk[..., 16:48, None] >> np.arange(8, dtype=np.uint8)) & 1  # (n, nsb, 32, 8)
        qh = to_lanes(_bit_planes(np.swapaxes(hbits, -1, -2)).reshape(n, nsb * 8, 2))
    return {
        "qs": to_lanes(_pack_nibbles(low).reshape(n, nsb * 8, 16)),
        "qh": qh,
        "fsc": to_lanes(np.stack([_half(blk[..., 0:2]), _half(blk[..., 2:4])], axis=-1)),
        "usc": to_lanes(np.stack([sc, mn], axis=-1).reshape(n, nsb * 8, 2)),
        "kind": KQ,
        "off": 0,
    }


def q8_0_layout(raw: np.ndarray, n: int, k: int) -> dict[str, object]:
    """Q8_0 -> qs (ng, NB, 32, G) i8, d (ng, NB, G) f32."""
    blk = raw.reshape(n, k // q.QK, q.Q8_0_BYTES)
    return {
        "qs": to_lanes(np.ascontiguousarray(blk[..., 2:]).view(np.int8)),
        "d": to_lanes(_half(blk[..., 0:2])),
    }


def q6_k_layout(raw: np.ndarray, n: int, k: int) -> dict[str, object]:
    """Q6_K -> per 32-value block: ql (16 B: value j | value j+16 << 4, low 4 bits),
    qh (8 B: byte j = top 2 bits of values j, j+8, j+16, j+24 at bits 0/2/4/6),
    sc (2 i8: scales of values 0..15 and 16..31), plus super-block d (f32).

    Shapes: ql (ng, NB, 16, G), qh (ng, NB, 8, G), sc (ng, NB, 2, G), d (ng, NB/8, G).
    """
    nsb = k // q.QK_K
    blk = raw.reshape(n, nsb, q.Q6_K_BYTES)
    ql = blk[..., 0:128].reshape(n, nsb, 2, 1, 64) >> np.array([0, 4], np.uint8).reshape(2, 1)
    qh = blk[..., 128:192].reshape(n, nsb, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8).reshape(
        4, 1
    )
    vals = ((ql & 0xF).reshape(n, nsb, 256) | ((qh & 3).reshape(n, nsb, 256) << 4)).reshape(
        n, nsb * 8, 32
    )
    hi2 = vals >> 4
    qh8 = hi2[..., 0:8] | (hi2[..., 8:16] << 2) | (hi2[..., 16:24] << 4) | (hi2[..., 24:32] << 6)
    sc = np.ascontiguousarray(blk[..., 192:208]).view(np.int8).reshape(n, nsb * 8, 2)
    return {
        "ql": to_lanes(_pack_nibbles(vals & 0xF)),
        "qh": to_lanes(qh8.astype(np.uint8)),
        "sc": to_lanes(sc),
        "d": to_lanes(_half(blk[..., 208:210])),
    }
