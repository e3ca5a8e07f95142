"""Argument checks for the native kernels' Python wrappers.

Native code (inline assembly, pool jobs, numba kernels with unsigned or unchecked
indices) trusts every length, stride and pad it is given: a negative pad turns into
a huge unsigned offset and writes past a buffer (heap corruption), a short bias is
read past its end. The wrappers call these checks before computing any address, so
a bad argument, whether it comes from a model, a run-time shape or a direct call,
ends in a ValueError naming the kernel and the value instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fail(kernel: str, what: str) -> ValueError:
    return ValueError(f"{kernel}: {what}")


def ints(kernel: str, name: str, values: Sequence[int], n: int, low: int) -> tuple[int, ...]:
    """The first `n` of `values` as Python ints, each >= low (at least n are needed)."""
    if n == 2 and len(values) >= 2:  # the common case, kept cheap: it runs on every call
        a, b = values[0], values[1]
        if type(a) is int and type(b) is int and a >= low and b >= low:
            return a, b
    vals = tuple(values)
    if len(vals) < n:
        raise fail(kernel, f"{name} needs {n} values, got {list(vals)}")
    out = []
    for v in vals[:n]:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise fail(kernel, f"{name} must be integers, got {list(vals)}")
        if v < low:
            raise fail(kernel, f"{name} must be >= {low}, got {list(vals)}")
        out.append(int(v))
    return tuple(out)


def rank(kernel: str, name: str, a: np.ndarray, n: int) -> None:
    if not isinstance(a, np.ndarray) or a.ndim != n:
        shape = list(a.shape) if isinstance(a, np.ndarray) else type(a).__name__
        raise fail(kernel, f"{name} must be {n}-D, got {shape}")


def length(kernel: str, name: str, a: np.ndarray | None, n: int) -> None:
    """a is None or holds exactly n values (one per output channel, say)."""
    if a is not None and np.size(a) != n:
        raise fail(kernel, f"{name} has {np.size(a)} values, expected {n}")


def shape(kernel: str, name: str, a: np.ndarray | None, want: tuple[int, ...]) -> None:
    if a is not None and tuple(a.shape) != want:
        raise fail(kernel, f"{name} has shape {list(a.shape)}, expected {list(want)}")


def float32_c(kernel: str, name: str, a: np.ndarray) -> None:
    """A buffer native code writes through its address: C-contiguous float32."""
    if a.dtype != np.float32 or not a.flags.c_contiguous or not a.flags.writeable:
        raise fail(kernel, f"{name} must be a writeable C-contiguous float32 array")


def window2d(
    kernel: str,
    x_shape: tuple[int, ...],
    kernel_hw: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads_begin: Sequence[int],
    out_hw: Sequence[int],
    pads_end: Sequence[int] | None = None,
) -> tuple[tuple[int, ...], ...]:
    """The checked geometry of a 2-D window op over x (N, C, H, W): kernel >= 1,
    strides >= 1, dilations >= 1, pads (and `pads_end`, when given) >= 0, out >= 0.
    A larger out_hw is more end padding (or ceil_mode's overhang): the kernels clip
    every window to the input, so it is no bounds risk."""
    if len(x_shape) != 4:
        raise fail(kernel, f"input must be 4-D (N, C, H, W), got {list(x_shape)}")
    k = ints(kernel, "kernel shape", kernel_hw, 2, 1)
    s = ints(kernel, "strides", strides, 2, 1)
    d = ints(kernel, "dilations", dilations, 2, 1)
    p = ints(kernel, "pads", pads_begin, 2, 0)
    o = ints(kernel, "output size", out_hw, 2, 0)
    if pads_end is not None:
        ints(kernel, "end pads", pads_end, 2, 0)
    return k, s, d, p, o


def _group(kernel: str, group: int) -> int:
    if isinstance(group, bool) or not isinstance(group, (int, np.integer)) or group < 1:
        raise fail(kernel, f"group must be an integer >= 1, got {group!r}")
    return int(group)


def conv2d_args(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    group: int,
    out_hw: Sequence[int],
    z: np.ndarray | None,
) -> None:
    """kernels/conv2d.conv2d's preconditions (every one of its paths relies on them)."""
    name = "conv2d"
    rank(name, "X", x, 4)
    rank(name, "W", w, 4)
    n, c, height, width = x.shape
    m, cg, kh, kw = w.shape
    g = _group(name, group)
    if cg * g != c or m % g:
        raise fail(name, f"X {list(x.shape)} and W {list(w.shape)} do not fit group={g}")
    _, _, _, _, (oh, ow) = window2d(name, x.shape, (kh, kw), strides, dilations, pads, out_hw)
    if n * m * oh * ow and not c * height * width:
        raise fail(name, f"empty input {list(x.shape)} for a non-empty output")
    length(name, "bias", bias, m)
    shape(name, "Z (residual)", z, (n, m, oh, ow))


def depthwise_args(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    strides: Sequence[int],
    pads_begin: Sequence[int],
    dilations: Sequence[int],
    out: np.ndarray,
    z: np.ndarray | None,
) -> None:
    """kernels/depthwise.depthwise2d_fused's preconditions: its jobs take x's, out's
    and z's addresses, so these must be float32 and C-contiguous as well."""
    name = "depthwise2d_fused"
    rank(name, "X", x, 4)
    rank(name, "W", w, 4)
    rank(name, "out", out, 4)
    if x.dtype != np.float32 or not x.flags.c_contiguous:
        raise fail(name, "X must be a C-contiguous float32 array")
    float32_c(name, "out", out)
    n, c, height, width = x.shape
    m = w.shape[0]
    if w.shape[1] != 1 or not c or m % c:
        raise fail(name, f"W {list(w.shape)} is not depthwise for X {list(x.shape)}")
    if out.shape[:2] != (n, m):
        raise fail(name, f"out {list(out.shape)} does not fit X {list(x.shape)}, W {list(w.shape)}")
    window2d(name, x.shape, w.shape[2:], strides, dilations, pads_begin, out.shape[2:])
    if out.size and not height * width:
        raise fail(name, f"empty input {list(x.shape)} for a non-empty output")
    length(name, "bias", bias, m)
    shape(name, "Z (residual)", z, tuple(out.shape))
