"""Depthwise 2-D convolution (group == channels), the MobileNet/ShuffleNet layer.

im2col + matmul is wasteful here (one input channel per group), so each output
plane is accumulated directly: for every kernel tap, a row-wise multiply-add.
The numpy reference is `depthwise_conv2d_reference` below.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np


@nb.njit(parallel=True, cache=True, nogil=True)
def _depthwise_conv2d(xp, w, sh, sw, dh, dw, out):
    """out[n, m, i, j] = sum_{a, b} xp[n, m // mult, i*sh + a*dh, j*sw + b*dw] * w[m, a, b].

    xp (N, C, Hp, Wp) padded input, w (M, KH, KW) with M = C * mult, out (N, M, OH, OW)
    zero-filled, all the same float dtype.
    """
    n_b, m, oh, ow = out.shape
    mult = m // xp.shape[1]
    kh, kw = w.shape[1], w.shape[2]
    for nm in nb.prange(n_b * m):  # each (n, m) writes only its own plane: no races
        n = nm // m
        oc = nm % m
        ic = oc // mult
        for i in range(oh):
            for a in range(kh):
                r = i * sh + a * dh
                for b in range(kw):
                    wv = w[oc, a, b]
                    c0 = b * dw
                    for j in range(ow):
                        out[n, oc, i, j] += xp[n, ic, r, c0 + j * sw] * wv


def depthwise_conv2d(
    xp: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
) -> np.ndarray:
    """Padded xp (N, C, Hp, Wp) * w (C * mult, 1, KH, KW) -> (N, C * mult, OH, OW)."""
    if xp.ndim != 4 or w.ndim != 4 or w.shape[1] != 1 or w.shape[0] % xp.shape[1]:
        raise ValueError(f"depthwise: bad shapes x {list(xp.shape)}, w {list(w.shape)}")
    if xp.dtype not in (np.float32, np.float64):
        raise ValueError(f"depthwise: float32/float64 only, got {xp.dtype}")
    oh, ow = out_hw
    kh, kw = w.shape[2:]
    need_h = (oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1
    need_w = (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1
    if need_h > xp.shape[2] or need_w > xp.shape[3]:
        raise ValueError(f"depthwise: input {list(xp.shape)} too small for output {oh}x{ow}")
    out = np.zeros((xp.shape[0], w.shape[0], oh, ow), dtype=xp.dtype)
    wk = np.ascontiguousarray(w[:, 0], dtype=xp.dtype)
    _depthwise_conv2d(
        np.ascontiguousarray(xp), wk, strides[0], strides[1], dilations[0], dilations[1], out
    )
    return out


def depthwise_conv2d_reference(
    xp: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
) -> np.ndarray:
    """numpy reference for depthwise_conv2d: one strided slab per kernel tap."""
    c = xp.shape[1]
    mult = w.shape[0] // c
    oh, ow = out_hw
    out = np.zeros((xp.shape[0], w.shape[0], oh, ow), dtype=xp.dtype)
    src = np.repeat(xp, mult, axis=1)  # output channel m reads input channel m // mult
    for a in range(w.shape[2]):
        for b in range(w.shape[3]):
            r0, c0 = a * dilations[0], b * dilations[1]
            slab = src[
                :,
                :,
                r0 : r0 + (oh - 1) * strides[0] + 1 : strides[0],
                c0 : c0 + (ow - 1) * strides[1] + 1 : strides[1],
            ]
            out += slab * w[:, 0, a, b].reshape(1, -1, 1, 1)
    return out
