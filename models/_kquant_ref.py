"""Plain numpy quantizers for the K-quants (Q2_K .. Q6_K), which gguf-py cannot quantize.

These are simple min/max (or abs-max) quantizers, not llama.cpp's error-minimizing
search: the tiny test models only need valid blocks whose values approximate the float
weights. Bit layouts are the exact inverse of gguf-py's `dequantize_blocks` (and
ggml-common.h's block_q*_K structs); `tests/parity` decodes them with gguf-py and
llama.cpp, so any packing slip would show up there. Every step is deterministic numpy
(rint = round half to even), so a seeded float tensor always gives the same bytes.
"""

from __future__ import annotations

import numpy as np

QK_K = 256


def _f16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to half precision (and back), as stored in the block."""
    return x.astype(np.float16).astype(np.float32)


def _f16_bytes(x: np.ndarray) -> np.ndarray:
    """(n,) float32 -> (n, 2) little-endian half bytes."""
    return x.astype("<f2").view(np.uint8).reshape(-1, 2)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b with 0 where b == 0."""
    out = np.zeros(np.broadcast(a, b).shape, np.float32)
    np.divide(a, b, out=out, where=b != 0)
    return out


def _pack_2bit(q: np.ndarray) -> np.ndarray:
    """(n, 256) values 0..3 -> (n, 64) bytes: value v sits in byte (v//128)*32 + v%32,
    bits 2*((v%128)//32) (the Q2_K / Q3_K `qs` order)."""
    q = q.reshape(-1, 2, 4, 32).astype(np.uint8)
    shifted = q << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)
    return np.bitwise_or.reduce(shifted, axis=2).reshape(-1, 64)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """(n, 256) values 0..15 -> (n, 128) bytes: sub-block 2c in the low and 2c+1 in the
    high nibble of bytes c*32 .. c*32+31 (the Q4_K / Q5_K `qs` order)."""
    q = q.reshape(-1, 4, 2, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)


def _pack_bits(bits: np.ndarray, n_planes: int) -> np.ndarray:
    """(n, n_planes*32) values 0/1 -> (n, 32) bytes: value v is bit v//32 of byte v%32."""
    b = bits.reshape(-1, n_planes, 32).astype(np.uint8)
    shifted = b << np.arange(n_planes, dtype=np.uint8).reshape(1, n_planes, 1)
    return np.bitwise_or.reduce(shifted, axis=1)


def _pack_scale_min_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """Two (n, 8) 6-bit arrays -> (n, 12) bytes, inverse of get_scale_min_k4."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    out = np.empty((sc.shape[0], 12), np.uint8)
    out[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    out[:, 4:8] = (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:] & 0xF) | ((mn[:, 4:] & 0xF) << 4)
    return out


def _min_max_blocks(
    x: np.ndarray,
    sub: int,
    n_levels: int,
    scale_bits: int,
) -> tuple[np.ndarray, ...]:
    """Asymmetric quantization value = (d*sc)*q - (dmin*m) with q in [0, n_levels).

    x (n, 256) -> d, dmin (n,) half-rounded f32, sc, m (n, 256/sub) ints, q (n, 256) ints.
    """
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    lo = np.minimum(xs.min(axis=2), 0.0)
    hi = xs.max(axis=2)
    scale = (hi - lo) / np.float32(n_levels - 1)
    mins = -lo
    top = np.float32((1 << scale_bits) - 1)
    d = _f16(scale.max(axis=1) / top)
    dmin = _f16(mins.max(axis=1) / top)
    sc = np.clip(np.rint(_div(scale, d[:, None])), 0, top)
    m = np.clip(np.rint(_div(mins, dmin[:, None])), 0, top)
    dl = (d[:, None] * sc)[:, :, None]
    ml = (dmin[:, None] * m)[:, :, None]
    q = np.clip(np.rint(_div(xs + ml, dl)), 0, n_levels - 1)
    return d, dmin, sc, m, q.reshape(n, QK_K)


def _abs_max_blocks(
    x: np.ndarray,
    sub: int,
    q_lo: int,
    scale_max: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric value = (d*sc)*q, q in [q_lo, -q_lo - 1]: the largest |x| of each
    sub-block maps to q_lo (the side with one more level), as ggml's make_qx_quants.

    x (n, 256) -> d (n,) half-rounded f32, sc (n, 256/sub) signed ints, q (n, 256) ints.
    """
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    idx = np.abs(xs).argmax(axis=2)
    peak = np.take_along_axis(xs, idx[:, :, None], axis=2)[:, :, 0]
    scale = peak / np.float32(q_lo)
    d = _f16(np.abs(scale).max(axis=1) / np.float32(scale_max))
    sc = np.clip(np.rint(_div(scale, d[:, None])), -scale_max - 1, scale_max)
    dl = (d[:, None] * sc)[:, :, None]
    q = np.clip(np.rint(_div(xs, dl)), q_lo, -q_lo - 1)
    return d, sc, q.reshape(n, QK_K)


def quantize_q2_k(x: np.ndarray) -> np.ndarray:
    """(n, 256) f32 -> (n, 84) bytes: scales[16] (sc | m << 4), qs[64], d, dmin."""
    d, dmin, sc, m, q = _min_max_blocks(x, 16, 4, 4)
    scales = sc.astype(np.uint8) | (m.astype(np.uint8) << 4)
    return np.concatenate([scales, _pack_2bit(q), _f16_bytes(d), _f16_bytes(dmin)], axis=1)


def quantize_q3_k(x: np.ndarray) -> np.ndarray:
    """(n, 256) f32 -> (n, 110) bytes: hmask[32], qs[64], scales[12], d.

    q = low2 - 4 * (1 - hbit) in [-4, 3]; 16 signed 6-bit scales stored + 32.
    """
    d, sc, q = _abs_max_blocks(x, 16, -4, 31)
    q = q.astype(np.int16)
    hbit = (q >= 0).astype(np.uint8)
    low = (q + 4 * (1 - hbit)).astype(np.uint8)
    s = (sc.astype(np.int16) + 32).astype(np.uint8)  # (n, 16) in 0..63
    scales = np.empty((x.shape[0], 12), np.uint8)
    scales[:, 0:8] = (s[:, 0:8] & 0xF) | ((s[:, 8:16] & 0xF) << 4)
    hi = (s >> 4).reshape(-1, 4, 4)  # index i*4 + j -> byte 8 + j, shift 2*i
    scales[:, 8:12] = np.bitwise_or.reduce(
        hi << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 4, 1), axis=1
    )
    return np.concatenate([_pack_bits(hbit, 8), _pack_2bit(low), scales, _f16_bytes(d)], axis=1)


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """(n, 256) f32 -> (n, 144) bytes: d, dmin, scales[12], qs[128]."""
    d, dmin, sc, m, q = _min_max_blocks(x, 32, 16, 6)
    return np.concatenate(
        [_f16_bytes(d), _f16_bytes(dmin), _pack_scale_min_k4(sc, m), _pack_nibbles(q)], axis=1
    )


def quantize_q5_k(x: np.ndarray) -> np.ndarray:
    """(n, 256) f32 -> (n, 176) bytes: d, dmin, scales[12], qh[32], qs[128]."""
    d, dmin, sc, m, q = _min_max_blocks(x, 32, 32, 6)
    q = q.astype(np.uint8)
    return np.concatenate(
        [
            _f16_bytes(d),
            _f16_bytes(dmin),
            _pack_scale_min_k4(sc, m),
            _pack_bits(q >> 4, 8),
            _pack_nibbles(q & 0xF),
        ],
        axis=1,
    )


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """(n, 256) f32 -> (n, 210) bytes: ql[128], qh[64], scales[16] (int8), d.

    Value v = h*128 + r: low nibble in ql[h*64 + r%64] (nibble r//64), high 2 bits in
    qh[h*32 + r%32] at bit 2*(r//32); q stored + 32.
    """
    d, sc, q = _abs_max_blocks(x, 16, -32, 127)
    u = (q + 32).astype(np.uint8).reshape(-1, 2, 128)  # (n, h, r)
    low, high = u & 0xF, u >> 4
    ql = (low[:, :, :64] | (low[:, :, 64:] << 4)).reshape(-1, 128)
    hq = high.reshape(-1, 2, 4, 32) << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)
    qh = np.bitwise_or.reduce(hq, axis=2).reshape(-1, 64)
    return np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), _f16_bytes(d)], axis=1)


QUANTIZERS = {
    "Q2_K": quantize_q2_k,
    "Q3_K": quantize_q3_k,
    "Q4_K": quantize_q4_k,
    "Q5_K": quantize_q5_k,
    "Q6_K": quantize_q6_k,
}


def quantize_k(x: np.ndarray, type_name: str) -> np.ndarray:
    """(rows, K) f32 with K % 256 == 0 -> (rows, K/256 * block bytes) uint8."""
    rows, k = x.shape
    if k % QK_K:
        raise ValueError(f"{type_name}: row length {k} is not a multiple of {QK_K}")
    blocks = QUANTIZERS[type_name](np.ascontiguousarray(x, np.float32).reshape(-1, QK_K))
    return np.ascontiguousarray(blocks).reshape(rows, -1)
