"""Conv, ConvInteger, QLinearConv and CausalConvWithState.

Conv is im2col + one batched BLAS matmul over (batch, group); a depthwise conv
(one input channel per group) is a numba kernel in 2-D (kernels/conv/depthwise.py),
otherwise a loop over the few kernel taps, each a vectorized multiply-add over
every output pixel. ConvTranspose and DeformConv live
in conv_transpose.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.conv.depthwise import depthwise2d_fused, depthwise_conv2d
from onnxexec.ops import _window as win
from onnxexec.ops.contrib.quant_iconv import (
    conv_integer_igemm,
    conv_packer,
    conv_weight_fits,
    packed_conv,
    qlinear_conv_igemm,
)
from onnxexec.ops.contrib.quant_igemm import PackedInt8
from onnxexec.ops.registry import op

# Rows of im2col built at once; bounds the temporary to ~256 MiB of float32.
_COLS_BUDGET = tuning.OPS_CONV_COLS_BUDGET


def compute_dtype(dt: np.dtype) -> np.dtype:
    """float16 / bfloat16 accumulate in float32 (numpy has no BLAS for them)."""
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def _depthwise(xw: np.ndarray, w: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Windows (N, C, O..., K...) * w (C * mult, 1, K...) -> (N, C * mult, O...)."""
    n, c = xw.shape[:2]
    nd = w.ndim - 2
    out_sp = xw.shape[2 : 2 + nd]
    mult = w.shape[0] // c
    wk = w.reshape(c, mult, -1).astype(dt, copy=False)
    acc = np.zeros((n, c, mult, *out_sp), dtype=dt)
    bcast = (1, c, mult) + (1,) * nd
    for t, idx in enumerate(np.ndindex(*w.shape[2:])):
        tap = xw[(..., *idx)]  # (N, C, O...)
        acc += tap[:, :, None] * wk[:, :, t].reshape(bcast)
    return acc.reshape(n, c * mult, *out_sp)


def _im2col_matmul(xw: np.ndarray, w: np.ndarray, group: int, dt: np.dtype) -> np.ndarray:
    """Windows (N, C, O..., K...) and w (M, C/g, K...) -> (N, M, O...), one matmul per chunk."""
    n, c = xw.shape[:2]
    nd = w.ndim - 2
    out_sp = xw.shape[2 : 2 + nd]
    m = w.shape[0]
    cg, mg = c // group, m // group
    o_total = int(np.prod(out_sp))
    k_total = int(np.prod(w.shape[2:]))
    wg = w.reshape(group, mg, cg * k_total).astype(dt, copy=False)
    # (N, C, K..., O...) so that the column matrix is (Cg*K, O) per (n, g)
    perm = (0, 1, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd))
    y = np.empty((n, group, mg, o_total), dtype=dt)
    step = max(1, _COLS_BUDGET // max(1, c * k_total * o_total))
    for s in range(0, n, step):
        part = xw[s : s + step].transpose(perm)
        cols = np.ascontiguousarray(part, dtype=dt).reshape(-1, group, cg * k_total, o_total)
        np.matmul(wg, cols, out=y[s : s + step])
    return y.reshape(n, m, *out_sp)


def conv_nd(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    *,
    group: int,
    g: win.Geometry,
    dt: np.dtype,
) -> np.ndarray:
    """Float convolution in dtype `dt`: x (N, C, D...), w (M, C/group, K...) -> (N, M, O...)."""
    n, c = x.shape[:2]
    nd = x.ndim - 2
    if c != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(f"X {list(x.shape)} and W {list(w.shape)} do not fit group={group}")
    if all(k == 1 for k in g.kernel) and not any(g.pads_begin) and not any(g.pads_end):
        # 1x1 conv: strided subsample, then (G, Mg, Cg) @ (N, G, Cg, D) with no im2col.
        xs = x[(slice(None), slice(None), *(slice(None, None, s) for s in g.strides))]
        m = w.shape[0]
        wm = w.reshape(group, m // group, c // group).astype(dt, copy=False)
        sp = math.prod(xs.shape[2:])  # written out: -1 cannot be inferred when N == 0
        xm = xs.astype(dt, copy=False).reshape(n, group, c // group, sp)
        y = np.matmul(wm[0] if group == 1 else wm, xm[:, 0] if group == 1 else xm)
        y = y.reshape(n, m, *xs.shape[2:])
    else:
        xp = win.padded(x, g, 0)
        if w.shape[1] == 1 and group == c and c > 1:
            if nd == 2:
                y = depthwise_conv2d(xp.astype(dt, copy=False), w, g.strides, g.dilations, g.out)
            else:
                y = _depthwise(win.windows(xp, g), w, dt)
        else:
            y = _im2col_matmul(win.windows(xp, g), w, group, dt)
    if b is not None:
        y += b.astype(dt, copy=False).reshape((1, -1) + (1,) * nd)
    return y


def conv_geometry(
    x: np.ndarray,
    w: np.ndarray,
    kernel_shape: Sequence[int] | None,
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str,
) -> win.Geometry:
    kernel = tuple(kernel_shape) if kernel_shape else w.shape[2:]
    if tuple(kernel) != tuple(w.shape[2:]):
        raise ValueError(f"kernel_shape {list(kernel)} does not match W {list(w.shape)}")
    return win.geometry(x.shape[2:], kernel, strides, dilations, pads, auto_pad)


@op("Conv", since=1)
def conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray:
    """X (N, C, D1..Dn), W (M, C/group, K1..Kn), B (M,) -> Y (N, M, O1..On)."""
    g = conv_geometry(x, w, kernel_shape, strides, dilations, pads, auto_pad)
    y = conv_nd(x, w, b, group=group, g=g, dt=compute_dtype(x.dtype))
    return y.astype(x.dtype, copy=False)


def _exact_conv(
    x: np.ndarray,
    w: np.ndarray,
    x_zero: np.ndarray | None,
    w_zero: np.ndarray | None,
    g: win.Geometry,
    group: int,
) -> np.ndarray:
    """Exact conv of (x - x_zero) and (w - w_zero), integer-valued floats (N, M, O...).

    float32 (BLAS / the depthwise kernel) when every partial sum stays below 2^24, where
    float32 holds integers exactly: per slice of input channels when one pass would not
    (slices summed in float64). Otherwise float64, exact below 2^37 products of 8 bits.
    Padding is the zero *after* subtracting the zero point, so x is shifted first.
    """
    xf = x.astype(np.float32)
    if x_zero is not None:
        xf -= np.float32(np.asarray(x_zero).reshape(-1)[0])
    wf = w.astype(np.float32)
    if w_zero is not None:
        wz = np.asarray(w_zero, dtype=np.float32).reshape(-1)
        wf -= wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz[0]
    taps = math.prod(w.shape[2:])
    bound = float(np.abs(xf).max(initial=0)) * float(np.abs(wf).max(initial=0)) * taps
    per_pass = int((1 << 24) // max(bound, 1.0))  # input channels one float32 pass may sum
    cg = w.shape[1]
    if cg == 1 and group == x.shape[1] > 1 and x.ndim == 4 and per_pass >= 1:
        # depthwise: the fused Conv's threaded float32 kernel (zero padding is right:
        # x is already shifted by its zero point)
        out = np.empty((x.shape[0], w.shape[0], *g.out), np.float32)
        return depthwise2d_fused(xf, wf, None, g.strides, g.pads_begin, g.dilations, out)
    if per_pass >= cg:
        return conv_nd(xf, wf, None, group=group, g=g, dt=np.dtype(np.float32))
    if group == 1 and per_pass >= 1:
        acc = None
        for c0 in range(0, cg, per_pass):
            part = conv_nd(
                xf[:, c0 : c0 + per_pass], wf[:, c0 : c0 + per_pass], None,
                group=1, g=g, dt=np.dtype(np.float32),
            )  # fmt: skip
            acc = part.astype(np.float64) if acc is None else acc + part
        return acc
    return conv_nd(xf.astype(np.float64), wf.astype(np.float64), None, group=group, g=g,
                   dt=np.dtype(np.float64))  # fmt: skip


def _int_conv(
    x: np.ndarray,
    w: np.ndarray,
    x_zero: np.ndarray | None,
    w_zero: np.ndarray | None,
    g: win.Geometry,
    group: int,
) -> np.ndarray:
    """Exact integer conv of (x - x_zero) and (w - w_zero) as int64 (N, M, O...)."""
    return np.rint(_exact_conv(x, w, x_zero, w_zero, g, group)).astype(np.int64)


@op("ConvInteger", since=10, prepare=conv_packer(1, 3))
def conv_integer(
    x: np.ndarray,
    w: np.ndarray,
    x_zero_point: np.ndarray | None = None,
    w_zero_point: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """x (N, C, D...) u8/i8, w (M, C/group, K...) u8/i8 -> y int32 (N, M, O...)."""
    g = conv_geometry(x, w, kernel_shape, strides, dilations, pads, auto_pad)
    if _igemm_conv(x, x_zero_point, w, w_zero_point, group):
        pw = packed_conv(prepared, w, w_zero_point)
        return conv_integer_igemm(x, x_zero_point, pw, g)
    return _int_conv(x, w, x_zero_point, w_zero_point, g, group).astype(np.int32)


def _igemm_conv(
    x: np.ndarray,
    x_zero: np.ndarray | None,
    w: np.ndarray,
    w_zero: np.ndarray | None,
    group: int,
) -> bool:
    """Whether the integer GEMM (ops/contrib/quant_iconv.py) takes this conv."""
    if x.dtype not in (np.uint8, np.int8) or (x_zero is not None and np.size(x_zero) != 1):
        return False
    return conv_weight_fits(w, w_zero, group)


@op("QLinearConv", since=10, prepare=conv_packer(3, 5))
def qlinear_conv(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None,
    w: np.ndarray,
    w_scale: np.ndarray,
    w_zero_point: np.ndarray | None,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """Quantized conv: y = sat(round(acc * x_scale * w_scale / y_scale) + y_zero_point).

    acc is the exact int32 conv of the zero-point-shifted inputs plus B (int32, in
    accumulator scale); w_scale / w_zero_point may be per output channel (M,).
    Rounding is half-to-even as QuantizeLinear's.
    """
    g = conv_geometry(x, w, kernel_shape, strides, dilations, pads, auto_pad)
    if _igemm_conv(x, x_zero_point, w, w_zero_point, group):
        xs = np.float32(np.asarray(x_scale).reshape(-1)[0])
        ys = np.float32(np.asarray(y_scale).reshape(-1)[0])
        mult = (xs * np.asarray(w_scale, np.float32).reshape(-1) / ys).astype(np.float32)
        out_dt = x.dtype if y_zero_point is None else y_zero_point.dtype
        yz = 0 if y_zero_point is None else int(y_zero_point.reshape(-1)[0])
        pw = packed_conv(prepared, w, w_zero_point)
        return qlinear_conv_igemm(x, x_zero_point, pw, g, b, mult, yz, np.dtype(out_dt))
    acc = _exact_conv(x, w, x_zero_point, w_zero_point, g, group)
    nd = x.ndim - 2
    if b is not None:  # int32 sum, rounded to float32 once below (as onnxruntime)
        acc = acc.astype(np.float64) + b.astype(np.float64).reshape((1, -1) + (1,) * nd)
    ws = np.asarray(w_scale, dtype=np.float32).reshape(-1)
    ws = ws.reshape((1, -1) + (1,) * nd) if ws.size > 1 else ws[0]
    xs = np.float32(np.asarray(x_scale).reshape(-1)[0])
    ys = np.float32(np.asarray(y_scale).reshape(-1)[0])
    real = acc.astype(np.float32) * (xs * ws / ys).astype(np.float32)
    out_dt = x.dtype if y_zero_point is None else y_zero_point.dtype
    yz = 0 if y_zero_point is None else np.int64(y_zero_point.reshape(-1)[0])
    info = np.iinfo(out_dt)
    q = np.rint(real) + np.float32(yz)
    return np.clip(q, info.min, info.max).astype(out_dt)


@op("CausalConvWithState", since=27)
def causal_conv_with_state(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    past_state: np.ndarray | None = None,
    *,
    activation: str = "none",
) -> tuple[np.ndarray, np.ndarray]:
    """x (B, C, L), weight (C, 1, k), past_state (B, C, k-1) -> y (B, C, L), state (B, C, k-1).

    y is the depthwise conv of concat(past_state or zeros, x) (no padding), with an
    optional fused SiLU; the new state is the last k-1 positions of that concatenation.
    """
    if activation not in ("none", "silu", "swish"):
        raise ValueError(f"CausalConvWithState: unknown activation '{activation}'")
    bsz, c, _ = x.shape
    k = weight.shape[2]
    if past_state is None:
        past_state = np.zeros((bsz, c, k - 1), dtype=x.dtype)
    full = np.concatenate([past_state, x], axis=2)
    dt = compute_dtype(x.dtype)
    g = win.geometry(full.shape[2:], (k,))
    y = conv_nd(full.astype(dt, copy=False), weight, bias, group=c, g=g, dt=dt)
    if activation != "none":
        # SiLU of the conv result already rounded to the input dtype (reference order).
        y = y.astype(x.dtype).astype(dt)
        y = y / (1.0 + np.exp(-y))
    present = full[:, :, full.shape[2] - (k - 1) :].copy()
    return y.astype(x.dtype, copy=False), present
