"""Exact 8-bit depthwise 2-D conv with QLinearConv's requantization (NCHW).

Each (image, channel) plane: the zero-point-shifted input (x - zx) in int32 with the
spec's zero padding around it, then per tap (ky, kx) the whole output plane gets
(w - zw) times the shifted window, a row at a time (contiguous when the stride is 1,
so it vectorizes). The int32 sum is exact (|x - zx| <= 255, |w - zw| <= 255, fewer
than 2^15 taps). Requantization as igemm's `_finish_requant`: float32(acc + bias)
times the float32 multiplier, clamped, rounded half to even by 1.5 * 2^23, plus yz,
saturated: QLinearConv's definition and onnxruntime's MLAS requantization.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_ROUND = np.float32(12582912.0)  # 1.5 * 2^23


@nb.njit(cache=True, nogil=True)
def _planes(x, zx, w, zw, bias, mult, yz, geo, out, p0, p1):  # pragma: no cover - numba
    kh, kw, sh, sw, dh, dw, ph, pw = geo
    c, h, wd = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = out.shape[2], out.shape[3]
    hp = max(h + ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(wd + pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    xp = np.zeros((hp, wp), np.int32)
    acc = np.empty((oh, ow), np.int32)
    lo = np.float32(np.iinfo(out.dtype).min)
    hi = np.float32(np.iinfo(out.dtype).max)
    fz = np.float32(yz)
    vlo, vhi = lo - fz - np.float32(1.0), hi - fz + np.float32(1.0)
    for p in range(p0, p1):
        n, ch = p // c, p % c
        for i in range(h):
            for j in range(wd):
                xp[ph + i, pw + j] = np.int32(x[n, ch, i, j]) - zx
        acc[:] = 0
        for ky in range(kh):
            for kx in range(kw):
                t = np.int32(w[ch, 0, ky, kx]) - zw[ch]
                for oy in range(oh):
                    iy = oy * sh + ky * dh
                    if sw == 1:
                        for ox in range(ow):
                            acc[oy, ox] += t * xp[iy, ox + kx * dw]
                    else:
                        for ox in range(ow):
                            acc[oy, ox] += t * xp[iy, ox * sw + kx * dw]
        b, m = bias[ch], mult[ch]
        for oy in range(oh):
            for ox in range(ow):
                v = np.float32(acc[oy, ox] + b) * m
                v = min(max(v, vlo), vhi)
                q = (v + _ROUND) - _ROUND + fz
                out[n, ch, oy, ox] = min(max(q, lo), hi)


def qdepthwise_planes(
    x: np.ndarray, zx: int, w: np.ndarray, zw: np.ndarray, bias: np.ndarray,
    mult: np.ndarray, yz: int, geo: np.ndarray, out: np.ndarray, p0: int, p1: int,
) -> None:  # fmt: skip
    """Planes p0..p1 (index n * C + c) of out (N, C, OH, OW) 8-bit from x (N, C, H, W)
    8-bit, w (C, 1, KH, KW) 8-bit, zw / bias int32 (C,), mult float32 (C,);
    geo = (kh, kw, sh, sw, dh, dw, pad top, pad left) int64. Releases the GIL."""
    _planes(x, zx, w, zw, bias, mult, yz, geo, out, p0, p1)
