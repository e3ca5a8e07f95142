"""Depthwise 2-D convolution (group == channels), the MobileNet/ShuffleNet layer.

im2col + matmul is wasteful here (one input channel per group), so each output
plane is accumulated directly. `depthwise2d_fused` is the float32 kernel of the
fused Conv (bias, residual and activation applied on the way out, planes split
across the kernel thread pool); `depthwise_conv2d` is the plain one the Conv handler
uses for float32/float64; the numpy reference is `depthwise_conv2d_reference`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from onnxexec.kernels import bounds, tuning
from onnxexec.kernels import objload as nb
from onnxexec.kernels.activation_kinds import CLAMPS
from onnxexec.kernels.conv.depthwise_planes import (
    NO_BIAS,
    NO_Z,
    dw_fused,
    dw_inplace,
    dw_inplace_s2,
)
from onnxexec.kernels.conv.dw_asm import AVAILABLE as DW_ASM
from onnxexec.kernels.conv.dw_asm import s2_masks, tap_masks
from onnxexec.native.launch import run_job
from onnxexec.native.parallel import (
    KIND_DW,
    MAX_SPANS,
    SPANS_PER_THREAD,
    native_pool,
    num_threads,
)


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


_DW_SPAN_MACS = tuning.DEPTHWISE_SPAN_MACS


def depthwise2d_fused(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    strides: Sequence[int],
    pads_begin: Sequence[int],
    dilations: Sequence[int],
    out: np.ndarray,
    act: int = 0,
    alpha: float = 0.0,
    beta: float = 0.0,
    z: np.ndarray | None = None,
) -> np.ndarray:
    """out (N, M, OH, OW) = act(depthwise(x) + bias + z), float32: x (N, C, H, W) C-contiguous,
    w (M, 1, KH, KW) with M = C * mult; pads_begin (top, left), the bottom / right padding
    being whatever out's size implies. Planes are split across the kernel thread pool.

    Preconditions (checked, ValueError otherwise: bounds.depthwise_args): x and out
    C-contiguous float32, out (N, M, ...) writeable; strides, dilations >= 1, pads
    >= 0; bias None or M values; z None or out's shape."""
    bounds.depthwise_args(x, w, bias, strides, pads_begin, dilations, out, z)
    if out.size == 0:
        return out
    n, m, oh, ow = out.shape
    wk = _f32(w.reshape(m, w.shape[2] * w.shape[3]))
    b = None if bias is None else _f32(bias.reshape(-1))
    zc = None if z is None else _f32(z)
    c, height, width = x.shape[1:]
    geo = (height, width, oh, ow, *w.shape[2:], *strides[:2], *pads_begin[:2], *dilations[:2])
    geo = tuple(int(v) for v in geo)
    masks = inplace_masks(geo, wk, zc is None, act)
    per_plane = oh * ow * wk.shape[1]
    parts = min(num_threads() * SPANS_PER_THREAD, m // max(1, _DW_SPAN_MACS // max(per_plane, 1)))
    parts = min(parts, MAX_SPANS)
    for i in range(n):
        xi, oi = x[i].reshape(c, height * width), out[i].reshape(m, oh * ow)
        zi = None if zc is None else zc[i].reshape(m, oh * ow)
        pool = native_pool() if parts > 1 else None
        if pool is None and masks is not None and geo[6] == 2:
            dw_inplace_s2(
                xi, wk, NO_BIAS if b is None else b, b is not None, geo, oi, 0, m, act,
                alpha, beta, masks.ctypes.data, masks.shape[0],
            )  # fmt: skip
            continue
        if pool is None and masks is not None:
            dw_inplace(
                xi, wk, NO_BIAS if b is None else b, b is not None, width, oi, 0, m, act,
                alpha, beta, masks.ctypes.data, masks.shape[0],
            )  # fmt: skip
            continue
        if pool is None:
            dw_fused(
                xi, wk, NO_BIAS if b is None else b, b is not None,
                NO_Z if zi is None else zi, zi is not None, geo, oi, 0, m, act, alpha, beta,
            )  # fmt: skip
            continue
        try:
            args = (
                xi.ctypes.data, wk.ctypes.data, oi.ctypes.data,
                0 if b is None else b.ctypes.data, 0 if zi is None else zi.ctypes.data,
                c, m, act, *geo, 0 if masks is None else masks.ctypes.data,
                0 if masks is None else masks.shape[0],
            )  # fmt: skip
            spans = np.array([m * k // parts for k in range(parts + 1)], dtype=np.int64)
            run_job(pool, KIND_DW, args, alpha, beta, spans, keep=(wk, b, masks))
        finally:
            pool.busy.release()
    return out


@lru_cache(maxsize=64)
def _tap_masks(height: int, width: int) -> np.ndarray:
    table = tap_masks(height, width)
    table.flags.writeable = False
    return table


def inplace_masks(geo: tuple[int, ...], wk: np.ndarray, no_z: bool, act: int) -> Any:
    """The mask table when an in-place AVX-512 run takes this call, else None: 3x3,
    dilation 1, no residual, no activation or Relu / Clip, and either stride 1 with one
    pixel of padding all round and finite weights (depthwise_planes.dw_inplace: a
    padding tap it skips would multiply an infinite weight by zero, NaN) or stride 2
    with one pixel of padding before (dw_inplace_s2, which loads the padding as
    zeros)."""
    height, width, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = geo
    if not (DW_ASM and no_z and act in CLAMPS and (kh, kw, dh, dw) == (3, 3, 1, 1)):
        return None
    if (sh, sw, ph, pw) == (2, 2, 1, 1) and oh > 0 and ow > 0:
        return _s2_masks(width, ow)
    if (sh, sw) != (1, 1) or (ph, pw, oh, ow) != (1, 1, height, width):
        return None
    if not np.isfinite(wk).all():
        return None
    return _tap_masks(height, width)


@lru_cache(maxsize=64)
def _s2_masks(width: int, ow: int) -> np.ndarray:
    table = s2_masks(width, ow)
    table.flags.writeable = False
    return table


def _f32(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.float32 and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a, dtype=np.float32)
