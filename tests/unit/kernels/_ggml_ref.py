"""Numpy references of llama.cpp's (x86 AVX2 + FMA) dot-product orders, for the
ggml_dot* kernel tests. Block decoders follow ggml-common.h's structs, vectorized;
fma(a, b, c) of float32 values is emulated in float64 (exact product, one rounding)."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.quant import qtypes as q


def fma(a, b, c):
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32)


def f32(x):
    return np.float32(x)


def half(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view("<f2")[..., 0].astype(np.float32)


def hsum8(acc: np.ndarray) -> np.ndarray:
    """hsum_float_8 over the last axis (8 lanes)."""
    a = (acc[..., 4:] + acc[..., :4]).astype(np.float32)
    return ((a[..., 0] + a[..., 2]).astype(np.float32) + (a[..., 1] + a[..., 3])).astype(np.float32)


def _scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], 1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], 1)
    return sc, mn


def decode_k(raw: np.ndarray, t: int):
    """Super-blocks (nb, bytes) -> values (nb, 256) as the AVX2 kernels multiply them,
    scales (nb, 16) per 16 values, mins (nb, 16), d, dmin (nb,)."""
    n = raw.shape[0]
    b = raw.astype(np.int64)
    sh4 = (2 * np.arange(4)).reshape(1, 1, 4, 1)
    zero = np.zeros(n, np.float32)
    if t == q.Q2_K:
        vals = ((b[:, 16:80].reshape(n, 2, 1, 32) >> sh4) & 3).reshape(n, 256)
        return vals, b[:, :16] & 15, b[:, :16] >> 4, half(raw[:, 80:82]), half(raw[:, 82:84])
    if t == q.Q3_K:
        ql = (b[:, 32:96].reshape(n, 2, 1, 32) >> sh4) & 3
        hbit = (b[:, None, None, 0:32] >> np.arange(8).reshape(1, 2, 4, 1)) & 1
        vals = (ql - 4 * (1 - hbit)).reshape(n, 256)
        k = np.arange(16)
        lo = np.where(k < 8, b[:, 96 + k % 8] & 15, b[:, 96 + k % 8] >> 4)
        hi = (b[:, 104 + k % 4] >> (2 * (k // 4))) & 3
        return vals, (lo | (hi << 4)) - 32, np.zeros((n, 16), np.int64), half(raw[:, 108:110]), zero
    if t in (q.Q4_K, q.Q5_K):
        sc, mn = _scale_min_k4(raw[:, 4:16])
        qs = b[:, 16:144] if t == q.Q4_K else b[:, 48:176]
        vals = (qs.reshape(n, 4, 1, 32) >> np.array([0, 4]).reshape(1, 1, 2, 1)) & 15
        if t == q.Q5_K:
            vals = vals | (((b[:, None, None, 16:48] >> np.arange(8).reshape(1, 4, 2, 1)) & 1) << 4)
        return (
            vals.reshape(n, 256),
            np.repeat(sc, 2, 1),
            np.repeat(mn, 2, 1),
            half(raw[:, 0:2]),
            half(raw[:, 2:4]),
        )
    # Q6_K: unsigned 6-bit values (the 32 offset is applied by the callers)
    ql = b[:, 0:128].reshape(n, 2, 2, 32)  # half, 32-byte run
    lo = np.stack([ql[:, :, 0] & 15, ql[:, :, 1] & 15, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], 2)
    hi = (b[:, 128:192].reshape(n, 2, 1, 32) >> sh4) & 3
    sc = raw[:, 192:208].view(np.int8).astype(np.int64)
    return (
        (lo | (hi << 4)).reshape(n, 256),
        sc,
        np.zeros((n, 16), np.int64),
        half(raw[:, 208:210]),
        zero,
    )


def quantize_q8_k(x: np.ndarray):
    """quantize_row_q8_K_ref: (T, K) -> q (T, K) int64, d (T, K/256), bsums (T, K/16)."""
    t, k = x.shape
    xb = x.astype(np.float32).reshape(t, k // 256, 256)
    idx = np.abs(xb).argmax(-1)
    mx = np.take_along_axis(xb, idx[..., None], -1)[..., 0]
    with np.errstate(divide="ignore"):
        iscale = np.where(mx != 0, np.float32(-127.0) / mx, np.float32(0)).astype(np.float32)
    qv = np.minimum(127, np.rint((xb * iscale[..., None]).astype(np.float32))).astype(np.int64)
    with np.errstate(divide="ignore"):
        d = np.where(mx != 0, np.float32(1.0) / iscale, np.float32(0)).astype(np.float32)
    return qv.reshape(t, k), d, qv.reshape(t, k // 16, 16).sum(-1)
