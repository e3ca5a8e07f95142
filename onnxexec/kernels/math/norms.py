"""Row-wise LayerNorm / RMSNorm over the last axis, with an optional residual input
(the "skip" of onnxruntime's SkipLayerNormalization) added first. numba, nogil;
rows are split across threads by the caller (`layer_norm`, `rms_norm`).

Statistics are accumulated in float64 from the float32 row (two passes: mean, then
the centred sum of squares), so they are as good as the float32 inputs allow; the
normalized row is written in float32. The sums are kernels/math/reduce.py's vectorized ones
(a plain float64 `acc +=` loop is one scalar dependency chain, ~5x slower).

The wider sums must not hide an overflow the graph they replace computes: the spec's
LayerNormalization (stash_type 1), its decomposition and onnxruntime sum in float32,
so a row whose float32 sum (or sum of squares) exceeds float32's range has an infinite
mean (variance) there. Such a row gets exactly that inf here: y = d / inf = 0 (or NaN).
Reference: `layer_norm_reference` below.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.math.reduce import row_sum, row_sumsq
from onnxexec.native.parallel import parallel_for

f32 = np.float32
_F32_MAX: Final = float(np.finfo(np.float32).max)
_DUMMY = np.zeros((1, 1), dtype=np.float32)
_DUMMY1 = np.zeros(1, dtype=np.float32)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _layer_norm_rows(
    x,
    skip,
    has_skip,
    skip_bias,
    has_skip_bias,
    scale,
    bias,
    has_bias,
    eps,
    rms,
    y,
    s_out,
    keep_sum,
    r0,
    r1,
):
    """y[r] = norm(x[r] + skip[r] + skip_bias) * scale + bias for rows r0..r1.

    x, skip, y, s_out (R, D) C-contiguous float32; skip rows may repeat (broadcast via
    r % skip rows). rms: RMSNorm (no centring, no bias). keep_sum: write the sum to s_out.
    """
    d = x.shape[1]
    srows = skip.shape[0]
    tmp = np.empty(d, dtype=np.float32)
    for r in range(r0, r1):
        s = s_out[r] if keep_sum else tmp
        xr = x[r]
        if has_skip:
            sk = skip[r % srows]
            for j in range(d):
                s[j] = xr[j] + sk[j]
        else:
            for j in range(d):
                s[j] = xr[j]
        if has_skip_bias:
            for j in range(d):
                s[j] += skip_bias[j]
        total = 0.0 if rms else row_sum(s)
        mean = total / d
        if abs(total) > _F32_MAX:  # float32's sum is inf: so is the unfused graph's mean
            mean = np.inf if total > 0 else -np.inf
        sq = row_sumsq(s, mean)
        if sq > _F32_MAX:  # float32's sum of squares overflows: variance inf, y 0 or NaN
            sq = np.inf
        inv = f32(1.0 / np.sqrt(sq / d + eps))
        m = f32(mean)
        yr = y[r]
        if has_bias:
            for j in range(d):
                yr[j] = (s[j] - m) * inv * scale[j] + bias[j]
        else:
            for j in range(d):
                yr[j] = (s[j] - m) * inv * scale[j]


def _rows(a: np.ndarray | None, d: int) -> np.ndarray | None:
    if a is None:
        return None
    return np.ascontiguousarray(a, dtype=np.float32).reshape(-1, d)


def layer_norm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    skip: np.ndarray | None = None,
    skip_bias: np.ndarray | None = None,
    epsilon: float = 1e-5,
    rms: bool = False,
    keep_sum: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """(y, x + skip + skip_bias or None) normalized over the last axis; float32 (..., D).

    `skip` may broadcast over the leading axes (its rows repeat); scale / bias / skip_bias
    are (D,).
    """
    d = x.shape[-1]
    x2 = _rows(x, d)
    sk = _rows(skip, d)
    if sk is not None and x2.shape[0] % sk.shape[0]:
        raise ValueError(f"skip {list(skip.shape)} does not broadcast to {list(x.shape)}")
    y = np.empty_like(x2)
    s_out = np.empty_like(x2) if keep_sum else _DUMMY
    sc = np.ascontiguousarray(scale, dtype=np.float32).reshape(-1)
    b = _DUMMY1 if bias is None else np.ascontiguousarray(bias, dtype=np.float32).reshape(-1)
    sb = _DUMMY1 if skip_bias is None else np.ascontiguousarray(skip_bias, np.float32).reshape(-1)
    if sc.size != d or (bias is not None and b.size != d):
        raise ValueError(f"scale/bias of size {sc.size}/{b.size} for a last axis of {d}")

    def run(r0: int, r1: int) -> None:
        _layer_norm_rows(
            x2,
            _DUMMY if sk is None else sk,
            sk is not None,
            sb,
            skip_bias is not None,
            sc,
            b,
            bias is not None,
            float(epsilon),
            rms,
            y,
            s_out,
            keep_sum,
            r0,
            r1,
        )

    # a span of ~64K elements: smaller jobs cost more to hand to a thread than to run
    parallel_for(run, x2.shape[0], min_chunk=max(1, 65536 // max(d, 1)))
    return y.reshape(x.shape), (s_out.reshape(x.shape) if keep_sum else None)


def layer_norm_reference(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    skip: np.ndarray | None = None,
    skip_bias: np.ndarray | None = None,
    epsilon: float = 1e-5,
    rms: bool = False,
) -> np.ndarray:
    """float64 numpy reference of layer_norm's first output."""
    s = x.astype(np.float64)
    if skip is not None:
        s = s + skip
    if skip_bias is not None:
        s = s + skip_bias
    c = s if rms else s - s.mean(-1, keepdims=True)
    y = c / np.sqrt((c * c).mean(-1, keepdims=True) + epsilon) * scale
    if bias is not None:
        y = y + bias
    return y.astype(np.float32)
