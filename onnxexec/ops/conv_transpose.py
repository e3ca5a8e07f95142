"""ConvTranspose (matmul + col2im scatter over kernel taps) and DeformConv."""

from __future__ import annotations

import itertools
import math

import numpy as np

from onnxexec.ops import _window as win
from onnxexec.ops.conv import compute_dtype
from onnxexec.ops.registry import op


def _transpose_pads(
    in_sp: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    pads: tuple[int, ...],
    output_padding: tuple[int, ...],
    output_shape: tuple[int, ...] | None,
    auto_pad: str,
) -> tuple[list[int], list[int]]:
    """(pads_begin, out_size) per spatial axis, per ConvTranspose's doc equations.

    With output_shape (or SAME_*, whose output_shape is in * stride) the pads are
    generated: total = s * (in - 1) + output_padding + span - out, the odd unit at the
    end for SAME_UPPER and at the beginning otherwise; explicit pads are then ignored.
    """
    n = len(in_sp)
    full = [
        s * (i - 1) + op_ + (k - 1) * d + 1
        for i, k, s, d, op_ in zip(in_sp, kernel, strides, dilations, output_padding, strict=True)
    ]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = tuple(i * s for i, s in zip(in_sp, strides, strict=True))
    if output_shape is not None:
        out = list(output_shape[-n:])
        total = [f - o for f, o in zip(full, out, strict=True)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        return begin, out
    if auto_pad == "VALID":
        pads = (0,) * (2 * n)
    return list(pads[:n]), [f - pads[i] - pads[n + i] for i, f in enumerate(full)]


@op("ConvTranspose", since=1)
def conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    output_padding: tuple[int, ...] | None = None,
    output_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray:
    """X (N, C, I...), W (C, M/group, K...), B (M,) -> Y (N, M, O...).

    cols = W_g^T @ X_g gives every (tap, input pixel) contribution; each kernel tap's
    slab is then added into the full output at stride s, offset tap * dilation.
    """
    n_b, c = x.shape[:2]
    nd = x.ndim - 2
    in_sp = x.shape[2:]
    kernel = tuple(w.shape[2:])
    if kernel_shape and tuple(kernel_shape) != kernel:
        raise ValueError(f"kernel_shape {list(kernel_shape)} does not match W {list(w.shape)}")
    s, d, p = win.defaults(nd, strides, dilations, pads)
    opad = tuple(output_padding[:nd]) if output_padding else (0,) * nd
    begin, out = _transpose_pads(in_sp, kernel, s, d, p, opad, output_shape, auto_pad)
    dt = compute_dtype(x.dtype)
    cg, mg = c // group, w.shape[1]
    m = mg * group
    k_total = int(np.prod(kernel))
    i_total = int(np.prod(in_sp))
    # (G, Mg*K, Cg) @ (N, G, Cg, I) -> (N, G, Mg*K, I)
    wt = w.astype(dt, copy=False).reshape(group, cg, mg * k_total).transpose(0, 2, 1)
    cols = np.matmul(wt, x.astype(dt, copy=False).reshape(n_b, group, cg, i_total))
    cols = cols.reshape(n_b, m, *kernel, *in_sp)
    full = win.scatter_taps(cols, in_sp, kernel, s, d)
    # Y[j] = full[begin + j] where that exists, 0 elsewhere (output_padding / negative pads).
    y = win.window_of(full, begin, out)
    if b is not None:
        y += b.astype(dt).reshape((1, -1) + (1,) * nd)
    return y.astype(x.dtype, copy=False)


def _sample_zero_pad(img: np.ndarray, coords: list[np.ndarray]) -> np.ndarray:
    """Multilinear sample of img (N, C, D...) at float pixel coords, 0 outside.

    coords[i] has shape (N, C, P) (broadcastable); result (N, C, P).
    """
    n, c = img.shape[:2]
    sp = img.shape[2:]
    flat = img.reshape(n, c, math.prod(sp))  # sizes written out: N may be 0
    lo = [np.floor(q).astype(np.int64) for q in coords]
    frac = [q - f for q, f in zip(coords, lo, strict=True)]
    out = None
    for corner in itertools.product((0, 1), repeat=len(sp)):
        idx = 0
        weight = 1.0
        ok = True
        for ax, bit in enumerate(corner):
            pos = lo[ax] + bit
            inside = (pos >= 0) & (pos < sp[ax])
            ok = ok & inside
            idx = idx * sp[ax] + np.clip(pos, 0, sp[ax] - 1)
            weight = weight * (frac[ax] if bit else 1.0 - frac[ax])
        idx, ok, weight = np.broadcast_arrays(idx, ok, weight)
        vals = np.take_along_axis(flat, idx.reshape(n, c, idx.shape[-1]), axis=2).reshape(idx.shape)
        term = np.where(ok, vals * weight, 0.0)
        out = term if out is None else out + term
    return out


@op("DeformConv", since=19)
def deform_conv(
    x: np.ndarray,
    w: np.ndarray,
    offset: np.ndarray,
    b: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    *,
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    offset_group: int = 1,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray:
    """X (N, C, D...), W (M, C/group, K...), offset (N, og*nd*K, O...), mask (N, og*K, O...).

    Tap t of output o samples X (bilinear, zero outside) at o * s - pad_begin +
    t * d + offset[og, t, axis, o]; the sampled columns then go through one matmul.
    """
    n_b, c = x.shape[:2]
    nd = x.ndim - 2
    kernel = tuple(kernel_shape) if kernel_shape else tuple(w.shape[2:])
    s, d, p = win.defaults(nd, strides, dilations, pads)
    out_sp = offset.shape[2:]
    k_total = int(np.prod(kernel))
    o_total = int(np.prod(out_sp))
    dt = compute_dtype(x.dtype)
    off = offset.astype(dt).reshape(n_b, offset_group, k_total, nd, o_total)
    msk = (
        np.ones((n_b, offset_group, k_total, o_total), dtype=dt)
        if mask is None
        else mask.astype(dt).reshape(n_b, offset_group, k_total, o_total)
    )
    # Base sampling position of each (tap, output) per axis, shape (K, O).
    taps = np.stack(np.meshgrid(*(np.arange(k) for k in kernel), indexing="ij"), 0)
    taps = taps.reshape(nd, k_total, 1)
    outs = np.stack(np.meshgrid(*(np.arange(o) for o in out_sp), indexing="ij"), 0)
    outs = outs.reshape(nd, 1, o_total)
    cpo = c // offset_group
    coords = []
    for ax in range(nd):
        base = outs[ax] * s[ax] - p[ax] + taps[ax] * d[ax]  # (K, O)
        q = base[None, None] + off[:, :, :, ax]  # (N, og, K, O)
        coords.append(np.repeat(q, cpo, axis=1).reshape(n_b, c, k_total * o_total))
    cols = _sample_zero_pad(x.astype(dt), coords).reshape(n_b, c, k_total, o_total)
    cols *= np.repeat(msk, cpo, axis=1)
    cg, m = c // group, w.shape[0]
    wg = w.astype(dt).reshape(group, m // group, cg * k_total)
    y = np.matmul(wg, cols.reshape(n_b, group, cg * k_total, o_total)).reshape(n_b, m, *out_sp)
    if b is not None:
        y += b.astype(dt).reshape((1, -1) + (1,) * nd)
    return y.astype(x.dtype, copy=False)
