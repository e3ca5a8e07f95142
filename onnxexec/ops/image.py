"""Image-layout ops: GridSample, AffineGrid, Col2Im, DepthToSpace, SpaceToDepth,
CenterCropPad."""

from __future__ import annotations

import itertools
import math

import numpy as np

from onnxexec.ops import _window as win
from onnxexec.ops.common import ints, norm_axes
from onnxexec.ops.registry import op

# --- GridSample ---


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold coordinates into [lo, hi] by mirroring at the borders (onnx reference)."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    k = np.floor(dx / rng)
    r = dx - k * rng
    even = (k % 2) == 0
    from_lo = np.where(even, lo + r, hi - r)
    from_hi = np.where(even, hi - r, lo + r)
    return np.where(below, from_lo, np.where(above, from_hi, x))


def _keys(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Cubic convolution weights of the 4 taps floor(x)-1 .. floor(x)+2 at fraction t."""

    def near(u):
        return ((a + 2) * u - (a + 3)) * u * u + 1

    def far(u):
        return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps_for_axis(
    x: np.ndarray, length: int, mode: str, padding: str, lo: float, hi: float
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per tap: (clamped index, weight, inside-mask) along one axis for coords x."""
    if mode == "nearest":
        offs, w = [0], [np.ones_like(x)]
        base = x
    elif mode == "linear":
        base = np.floor(x)
        t = x - base
        offs, w = [0, 1], [1 - t, t]
    else:
        base = np.floor(x)
        offs, w = [-1, 0, 1, 2], _keys(x - base)
    out = []
    for o, wt in zip(offs, w, strict=True):
        i = base + o
        if padding == "zeros":
            inside = (i >= 0) & (i < length)
            idx = np.clip(i, 0, length - 1)
        elif padding == "border":
            inside = None
            idx = np.clip(i, 0, length - 1)
        else:
            inside = None
            idx = np.clip(np.trunc(_reflect(i, lo, hi)), 0, length - 1)
        out.append((idx.astype(np.int64), wt, inside))
    return out


def grid_sample_nd(
    x: np.ndarray, grid: np.ndarray, mode: str, padding_mode: str, align_corners: int
) -> np.ndarray:
    """X (N, C, D1..Dn), grid (N, O1..Om, n) with (x, y, z...) last -> Y (N, C, O1..Om)."""
    n_b, c = x.shape[:2]
    sp = x.shape[2:]
    nd = len(sp)
    out_sp = grid.shape[1:-1]
    # Sizes written out: reshape(..., -1) cannot infer them when N == 0.
    g = grid.reshape(n_b, math.prod(out_sp), nd).astype(np.float32)[..., ::-1]  # D1..Dn order
    taps_per_axis = []
    for ax, length in enumerate(sp):
        v = g[..., ax]
        if align_corners:
            coord = (v + 1) / 2 * (length - 1)
            lo, hi = 0.0, length - 1.0
        else:
            coord = ((v + 1) * length - 1) / 2
            lo, hi = -0.5, length - 0.5
        coord = coord.astype(np.float64)
        if mode == "nearest":
            coord = np.rint(coord)
        # Linear / nearest move an out-of-range coordinate back inside first; cubic
        # keeps it and maps each of its 4 taps instead (PyTorch and onnxruntime).
        if mode != "cubic":
            if padding_mode == "border":
                out = (coord < lo) | (coord > hi)
                coord = np.where(out, np.clip(coord, 0, length - 1), coord)
            elif padding_mode == "reflection":
                coord = _reflect(coord, lo, hi)
        taps_per_axis.append(_taps_for_axis(coord, length, mode, padding_mode, lo, hi))
    dt = np.float64 if x.dtype == np.float64 else np.float32
    flat = x.reshape(n_b, c, math.prod(sp)).astype(dt, copy=False)
    bidx = np.arange(n_b)[:, None, None]
    cidx = np.arange(c)[None, :, None]
    y = np.zeros((n_b, c, g.shape[1]), dtype=dt)
    for combo in itertools.product(*taps_per_axis):
        idx = np.zeros(g.shape[:2], dtype=np.int64)
        w = np.ones(g.shape[:2])
        for ax, (i, wt, inside) in enumerate(combo):
            idx = idx * sp[ax] + i
            w = w * (wt if inside is None else np.where(inside, wt, 0.0))
        y += flat[bidx, cidx, idx[:, None, :]] * w[:, None, :].astype(dt)
    return y.reshape(n_b, c, *out_sp).astype(x.dtype, copy=False)


@op("GridSample", since=20)
def grid_sample(
    x: np.ndarray,
    grid: np.ndarray,
    *,
    align_corners: int = 0,
    mode: str = "linear",
    padding_mode: str = "zeros",
) -> np.ndarray:
    """N-D: X (N, C, D...), grid (N, O..., nd) normalized to [-1, 1] -> Y (N, C, O...)."""
    if mode not in ("linear", "nearest", "cubic"):
        raise ValueError(f"GridSample: unknown mode '{mode}'")
    return grid_sample_nd(x, grid, mode, padding_mode, align_corners)


@op("GridSample", since=16)
def grid_sample_v16(
    x: np.ndarray,
    grid: np.ndarray,
    *,
    align_corners: int = 0,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
) -> np.ndarray:
    """Opsets 16-19: 4-D only, modes spelt bilinear / nearest / bicubic."""
    m = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}.get(mode)
    if m is None or x.ndim != 4:
        raise ValueError(f"GridSample-16: mode '{mode}' on rank {x.ndim} is not supported")
    return grid_sample_nd(x, grid, m, padding_mode, align_corners)


@op("AffineGrid", since=20)
def affine_grid(theta: np.ndarray, size: np.ndarray, *, align_corners: int = 0) -> np.ndarray:
    """theta (N, 2, 3) | (N, 3, 4), size (N, C, H, W) | (N, C, D, H, W)
    -> grid (N, H, W, 2) | (N, D, H, W, 3), last axis ordered (x, y[, z])."""
    dims = ints(size)[2:]
    axes = []
    for length in dims:
        i = np.arange(length, dtype=np.float64)
        if align_corners:
            axes.append(-1 + 2 * i / (length - 1) if length > 1 else np.zeros(1))
        else:
            axes.append(-1 + (2 * i + 1) / length)
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    homo = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1).reshape(-1, len(dims) + 1)
    grid = np.matmul(theta.astype(np.float64), homo.T).transpose(0, 2, 1)
    return grid.reshape(theta.shape[0], *dims, len(dims)).astype(theta.dtype)


# --- Col2Im ---


@op("Col2Im", since=18)
def col2im(
    x: np.ndarray,
    image_shape: np.ndarray,
    block_shape: np.ndarray,
    *,
    dilations: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray:
    """(N, C * prod(block), L) -> (N, C, *image_shape), summing overlapping blocks."""
    img, blk = ints(image_shape), ints(block_shape)
    nd = len(img)
    s, d, p = win.defaults(nd, strides, dilations, pads)
    n_blocks = [
        (i + p[k] + p[nd + k] - ((b - 1) * d[k] + 1)) // s[k] + 1
        for k, (i, b) in enumerate(zip(img, blk, strict=True))
    ]
    n_b = x.shape[0]
    c = x.shape[1] // int(np.prod(blk))
    cols = x.reshape(n_b, c, *blk, *n_blocks)
    full = win.scatter_taps(cols, n_blocks, blk, s, d)
    return win.window_of(full, p[:nd], img)


# --- DepthToSpace / SpaceToDepth ---


def _d2s(x: np.ndarray, b: int, mode: str) -> np.ndarray:
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise ValueError(f"DepthToSpace: unknown mode '{mode}'")
    return t.reshape(n, c // (b * b), h * b, w * b)


@op("DepthToSpace", since=11)
def depth_to_space(x: np.ndarray, *, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """(N, C, H, W) -> (N, C / b^2, H * b, W * b); DCR: depth-column-row channel order."""
    return _d2s(x, blocksize, mode)


@op("DepthToSpace", since=1)
def depth_to_space_v1(x: np.ndarray, *, blocksize: int) -> np.ndarray:
    return _d2s(x, blocksize, "DCR")


def _s2d(x: np.ndarray, b: int, mode: str) -> np.ndarray:
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b)
    if mode == "DCR":
        t = t.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        t = t.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"SpaceToDepth: unknown mode '{mode}'")
    return t.reshape(n, c * b * b, h // b, w // b)


@op("SpaceToDepth", since=28)
def space_to_depth(x: np.ndarray, *, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """(N, C, H, W) -> (N, C * b^2, H / b, W / b); inverse of DepthToSpace in `mode`."""
    return _s2d(x, blocksize, mode)


@op("SpaceToDepth", since=1)
def space_to_depth_v1(x: np.ndarray, *, blocksize: int) -> np.ndarray:
    return _s2d(x, blocksize, "DCR")


# --- CenterCropPad ---


@op("CenterCropPad", since=18)
def center_crop_pad(
    x: np.ndarray, shape: np.ndarray, *, axes: tuple[int, ...] | None = None
) -> np.ndarray:
    """Crop or zero-pad each of `axes` to `shape`, centred; an odd surplus goes to the end."""
    target = ints(shape)
    ax = norm_axes(axes, x.ndim, "CenterCropPad") if axes else tuple(range(x.ndim))
    out = list(x.shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    for a, t in zip(ax, target, strict=True):
        dim = x.shape[a]
        out[a] = t
        if t < dim:
            st = (dim - t) // 2
            src[a] = slice(st, st + t)
        elif t > dim:
            st = (t - dim) // 2
            dst[a] = slice(st, st + dim)
    y = np.zeros(out, dtype=x.dtype)
    y[tuple(dst)] = x[tuple(src)]
    return y
