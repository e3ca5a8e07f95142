"""Multi-head attention for the fused attention op: per (batch, head) one sgemm for
the scores, a numba softmax with scale and additive mask, one sgemm with V; heads
are split across threads, each with its own score buffer.

Grouped-query attention: K / V may have fewer heads (Hkv dividing H); query head h
reads kv head h // (H / Hkv). K is taken transposed, (B, Hkv, Dh, S), as exporters
compute it (a Transpose view costs nothing here: sgemm reads it in place).

A row whose scores are all -inf (fully masked) has no softmax: it gives NaN, as
Softmax would, or zeros with nan_to_zero (torch's SDPA export adds Where(IsNaN)).
Reference: `attention_reference` below.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.parallel import parallel_for
from onnxexec.kernels.vmath import exp_row

f32 = np.float32
_NO_MASK = np.zeros((1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def softmax_rows(x, mask, has_mask, scale, nan_to_zero, scratch):
    """In place: x[t] = softmax(x[t] * scale + mask[t]) for every row of x (T, S)."""
    t_rows, s = x.shape
    sc = f32(scale)
    for t in range(t_rows):
        row = x[t]
        if has_mask:
            mrow = mask[t]
            for j in range(s):
                row[j] = row[j] * sc + mrow[j]
        elif sc != f32(1.0):
            for j in range(s):
                row[j] = row[j] * sc
        mx = row[0]
        bad = False
        for j in range(s):
            v = row[j]
            mx = max(mx, v)
            bad |= v != v
        total = np.nan
        if mx != -np.inf and not bad:
            for j in range(s):
                row[j] = row[j] - mx
            exp_row(row, row, scratch)
            total = 0.0
            for j in range(s):
                total += row[j]
        if np.isnan(total):  # fully masked (or NaN) row: Softmax gives NaN everywhere
            fill = f32(0.0) if nan_to_zero else f32(np.nan)
            for j in range(s):
                row[j] = fill
            continue
        inv = f32(1.0 / total)
        for j in range(s):
            row[j] = row[j] * inv


def attention(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    scale: float,
    nan_to_zero: bool,
) -> np.ndarray:
    """softmax(q @ kt * scale + mask) @ v: q (B, H, T, Dh), kt (B, Hkv, Dh, S),
    v (B, Hkv, S, Dv), additive mask broadcastable to (B, H, T, S) -> (B, H, T, Dv)."""
    b, h, t, dh = q.shape
    hkv, s = kt.shape[1], kt.shape[3]
    if kt.shape[0] != b or kt.shape[2] != dh or v.shape[:3] != (b, hkv, s) or h % hkv:
        raise ValueError(
            f"attention: q {list(q.shape)}, k^T {list(kt.shape)}, v {list(v.shape)} do not fit"
        )
    group = h // hkv
    out = np.empty((b, h, t, v.shape[3]), dtype=np.float32)
    m4 = None
    if mask is not None:
        m4 = np.broadcast_to(mask.astype(np.float32, copy=False), (b, h, t, s))

    def heads(i0: int, i1: int) -> None:
        scores = np.empty((t, s), dtype=np.float32)
        scratch = np.empty(s, dtype=np.int32)
        for i in range(i0, i1):
            bi, hi = divmod(i, h)
            hk = hi // group
            np.matmul(q[bi, hi], kt[bi, hk], out=scores)
            mrow = _NO_MASK if m4 is None else m4[bi, hi]
            softmax_rows(scores, mrow, m4 is not None, scale, nan_to_zero, scratch)
            np.matmul(scores, v[bi, hk], out=out[bi, hi])

    parallel_for(heads, b * h)
    return out


def attention_reference(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    scale: float,
    nan_to_zero: bool,
) -> np.ndarray:
    """float64 numpy reference of attention (GQA by repeating kv heads)."""
    group = q.shape[1] // kt.shape[1]
    k = np.repeat(kt.astype(np.float64), group, axis=1)
    vv = np.repeat(v.astype(np.float64), group, axis=1)
    sc = q.astype(np.float64) @ k * scale
    if mask is not None:
        sc = sc + mask
    with np.errstate(invalid="ignore"):
        e = np.exp(sc - sc.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0.0, p)
    return (p @ vv).astype(np.float32)
