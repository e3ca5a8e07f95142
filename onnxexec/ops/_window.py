"""Sliding-window geometry shared by Conv* and *Pool handlers (not a handler module).

Every function works on the spatial axes only: an input is (N, C, D1, ..., Dn) and
`kernel`, `strides`, `dilations` have n entries; `pads` is ONNX's
[x1_begin, ..., xn_begin, x1_end, ..., xn_end].
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Geometry:
    """Where each output position's window starts, per spatial axis."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def span(self) -> tuple[int, ...]:
        """Extent of one dilated window: (k - 1) * d + 1."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations, strict=True))


def defaults(
    n: int,
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Fill absent strides / dilations / pads with their spec defaults (1, 1, 0)."""
    s = tuple(strides) if strides else (1,) * n
    d = tuple(dilations) if dilations else (1,) * n
    p = tuple(pads) if pads else (0,) * (2 * n)
    if len(s) != n or len(d) != n or len(p) != 2 * n:
        raise ValueError(f"strides {s}, dilations {d} and pads {p} do not fit {n} spatial axes")
    return s, d, p


def geometry(
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: bool = False,
) -> Geometry:
    """Output size and effective pads of a conv / pool window over `in_shape` (spatial).

    auto_pad SAME_*: out = ceil(in / s), total pad = (out - 1) * s + span - in, the odd
    unit going to the end (SAME_UPPER) or the beginning (SAME_LOWER). NOTSET:
    out = floor-or-ceil((in + pads - span) / s) + 1; with ceil_mode, a window that
    would start inside the end padding is dropped (PyTorch's rule, kept by ONNX).
    """
    n = len(in_shape)
    kernel = tuple(int(k) for k in kernel)
    s, d, p = defaults(n, strides, dilations, pads)
    span = [(k - 1) * dd + 1 for k, dd in zip(kernel, d, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-i // st) for i, st in zip(in_shape, s, strict=True))
        total = [
            max(0, (o - 1) * st + sp - i)
            for o, st, sp, i in zip(out, s, span, in_shape, strict=True)
        ]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        pb, pe = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return Geometry(kernel, s, d, tuple(pb), tuple(pe), out)
    if auto_pad == "VALID":
        pb = pe = (0,) * n
    elif auto_pad in ("NOTSET", ""):
        pb, pe = p[:n], p[n:]
    else:
        raise ValueError(f"unknown auto_pad '{auto_pad}'")
    out_l = []
    for i in range(n):
        room = in_shape[i] + pb[i] + pe[i] - span[i]
        o = (-(-room // s[i]) if ceil_mode else room // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= in_shape[i] + pb[i]:
            o -= 1
        if o < 0:
            # onnxruntime refuses these too (pool_attributes.h ComputeOutputSize); a
            # window this much larger than the input is a malformed model, not an
            # empty output (and its taps would be walked for nothing)
            raise ValueError(
                f"calculated output dimension {i} is negative ({o}): input {in_shape[i]}, "
                f"pads {pb[i]}+{pe[i]}, kernel span {span[i]}, stride {s[i]}"
            )
        out_l.append(o)
    return Geometry(kernel, s, d, tuple(pb), tuple(pe), tuple(out_l))


def padded(x: np.ndarray, g: Geometry, value: float | int = 0) -> np.ndarray:
    """x with g's pads on the spatial axes, grown at the end so every window fits."""
    n = len(g.kernel)
    widths = [(0, 0)] * (x.ndim - n)
    for i in range(n):
        need = (g.out[i] - 1) * g.strides[i] + g.span[i] if g.out[i] else 0
        have = x.shape[x.ndim - n + i] + g.pads_begin[i]
        widths.append((g.pads_begin[i], max(need - have, 0)))
    if not any(a or b for a, b in widths):
        return x
    return np.pad(x, widths, mode="constant", constant_values=value)


def windows(xp: np.ndarray, g: Geometry) -> np.ndarray:
    """Read-only view (..., O1..On, K1..Kn) of the windows of a padded input."""
    n = len(g.kernel)
    lead = xp.shape[: xp.ndim - n]
    sp = xp.strides[xp.ndim - n :]
    shape = (*lead, *g.out, *g.kernel)
    strides = (
        *xp.strides[: xp.ndim - n],
        *(st * s for st, s in zip(sp, g.strides, strict=True)),
        *(st * d for st, d in zip(sp, g.dilations, strict=True)),
    )
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def valid_counts(in_len: int, g: Geometry, axis: int, include_pad: bool) -> np.ndarray:
    """Per output position on one axis: how many window taps fall on real input
    (include_pad=False) or on input-or-explicit-padding (include_pad=True).

    Taps past the end padding (ceil_mode overhang) never count.
    """
    starts = np.arange(g.out[axis]) * g.strides[axis] - g.pads_begin[axis]
    taps = starts[:, None] + np.arange(g.kernel[axis]) * g.dilations[axis]
    lo, hi = (-g.pads_begin[axis], in_len + g.pads_end[axis]) if include_pad else (0, in_len)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def scatter_taps(
    cols: np.ndarray,
    in_sp: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> np.ndarray:
    """col2im: cols (..., K1..Kn, I1..In) -> (..., F1..Fn), F = (I - 1) * s + (K - 1) * d + 1.

    Tap t's slab (..., I...) is added at offset t * d with stride s: one vectorized
    add per kernel tap.
    """
    n = len(kernel)
    lead = cols.shape[: cols.ndim - 2 * n]
    full_sp = [
        (i - 1) * s + (k - 1) * d + 1
        for i, k, s, d in zip(in_sp, kernel, strides, dilations, strict=True)
    ]
    full = np.zeros((*lead, *full_sp), dtype=cols.dtype)
    nl = len(lead)
    for tap in itertools.product(*(range(k) for k in kernel)):
        dst = tuple(
            slice(t * d, t * d + (i - 1) * s + 1, s)
            for t, d, i, s in zip(tap, dilations, in_sp, strides, strict=True)
        )
        full[(slice(None),) * nl + dst] += cols[(slice(None),) * nl + tap]
    return full


def window_of(full: np.ndarray, begin: Sequence[int], out: Sequence[int]) -> np.ndarray:
    """Y[..., j] = full[..., begin + j] on the last len(out) axes; 0 where that is outside."""
    n = len(out)
    lead = full.shape[: full.ndim - n]
    y = np.zeros((*lead, *out), dtype=full.dtype)
    src, dst = [], []
    for b, o, f in zip(begin, out, full.shape[full.ndim - n :], strict=True):
        lo, hi = max(b, 0), max(min(b + o, f), max(b, 0))
        src.append(slice(lo, hi))
        dst.append(slice(lo - b, hi - b))
    y[(slice(None),) * len(lead) + tuple(dst)] = full[(slice(None),) * len(lead) + tuple(src)]
    return y
