"""Rotary position embedding, rotate-half form (Llama / GPT-NeoX), in one pass (numba):

    y = x * cos + rotate_half(x) * sin,  rotate_half(x) = concat(-x[..., h:], x[..., :h])

with h = D / 2, for x (B, H, T, D) of any strides (exporters feed a Transpose view) and
cos / sin broadcast to x's shape. The products and the sum are rounded in float32 in
the order written, as the unfused Mul / Mul / Add do. Reference: `rope_reference`.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb


@nb.njit(nogil=True, cache=True)
def _rope(x, cos, sin, out):
    b_, h_, t_, d = x.shape
    half = d // 2
    for b in range(b_):
        for h in range(h_):
            for t in range(t_):
                xr, c, s, y = x[b, h, t], cos[b, h, t], sin[b, h, t], out[b, h, t]
                for j in range(half):
                    y[j] = xr[j] * c[j] + (-xr[j + half]) * s[j]
                for j in range(half, d):
                    y[j] = xr[j] * c[j] + xr[j - half] * s[j]


@nb.njit(nogil=True, cache=True)
def _rope_td(x, cos, sin, out):
    """The common case, every operand C-contiguous (the loops vectorize): x (R, T, D),
    one (T, D) table of cos / sin shared by all R = B * H heads."""
    r_, t_, d = x.shape
    half = d // 2
    for r in range(r_):
        for t in range(t_):
            xr, c, s, y = x[r, t], cos[t], sin[t], out[r, t]
            for j in range(half):
                y[j] = xr[j] * c[j] + (-xr[j + half]) * s[j]
            for j in range(half, d):
                y[j] = xr[j] * c[j] + xr[j - half] * s[j]


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x (B, H, T, D) float32 with D even; cos / sin broadcastable to it -> (B, H, T, D)."""
    if x.ndim != 4 or x.shape[-1] % 2:
        raise ValueError(f"rope: (B, H, T, D) with an even D expected, got {list(x.shape)}")
    b, h, t, d = x.shape
    if all(a.shape[-2:] == (t, d) and a.size == t * d for a in (cos, sin)):
        out = np.empty(x.shape, dtype=np.float32)
        _rope_td(
            np.ascontiguousarray(x).reshape(b * h, t, d),
            np.ascontiguousarray(cos, dtype=np.float32).reshape(t, d),
            np.ascontiguousarray(sin, dtype=np.float32).reshape(t, d),
            out.reshape(b * h, t, d),
        )
        return out
    c = np.broadcast_to(cos.astype(np.float32, copy=False), x.shape)
    s = np.broadcast_to(sin.astype(np.float32, copy=False), x.shape)
    out = np.empty(x.shape, dtype=np.float32)
    _rope(x, c, s, out)
    return out


def rope_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """numpy reference (the unfused graph's ops, in float32)."""
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos + rot * sin
