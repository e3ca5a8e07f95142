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

from onnxexec.kernels import blas
from onnxexec.kernels.parallel import parallel_for
from onnxexec.kernels.reduce import LANES, row_max, row_sum
from onnxexec.kernels.vmath import exp_row

f32 = np.float32
_NO_MASK = np.zeros((1, 1), dtype=np.float32)
_NO_MASK4 = np.zeros((1, 1, 1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def softmax_rows(x, mask, has_mask, scale, nan_to_zero, scratch):
    """In place: x[t] = softmax(x[t] * scale + mask[t]) for every row of x (T, S).

    The max and the sum are kernels/reduce.py's vectorized reductions. The
    max ignores NaN; a NaN score (or +inf, whose shifted value is inf - inf) makes
    the sum NaN, and such a row is filled like a fully masked one."""
    t_rows, s = x.shape
    sc = f32(scale)
    acc32 = np.empty(LANES, dtype=np.float32)
    for t in range(t_rows):
        row = x[t]
        if has_mask:
            mrow = mask[t]
            for j in range(s):
                row[j] = row[j] * sc + mrow[j]
        elif sc != f32(1.0):
            for j in range(s):
                row[j] = row[j] * sc
        mx = row_max(row, acc32)
        total = np.nan
        if mx != -np.inf:
            for j in range(s):
                row[j] = row[j] - mx
            exp_row(row, row, scratch)
            total = row_sum(row)
        if np.isnan(total):  # fully masked (or NaN) row: Softmax gives NaN everywhere
            fill = f32(0.0) if nan_to_zero else f32(np.nan)
            for j in range(s):
                row[j] = fill
            continue
        inv = f32(1.0 / total)
        for j in range(s):
            row[j] = row[j] * inv


@nb.njit(nogil=True, cache=True)
def _ld(a):
    """(transposed, leading dimension) of a 2-D float32 view for sgemm: unit stride
    along its rows (0) or columns (1, read as the transpose); -1 if neither."""
    r, c = a.shape
    s0, s1 = a.strides
    if s1 == 4 or c == 1:
        ld = s0 // 4 if r > 1 else c
        return 0, ld if ld >= c and s0 % 4 == 0 else -1
    if s0 == 4 or r == 1:
        ld = s1 // 4 if c > 1 else r
        return 1, ld if ld >= r and s1 % 4 == 0 else -1
    return 0, -1


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _heads(fn, q, kt, v, m4, has_mask, scale, nan_to_zero, out, i0, i1):
    """Heads [i0, i1) of attention (index b * H + h), GIL-free: per head one sgemm for
    the scores, softmax_rows, one sgemm with V. Operands were checked by
    `_blas_views` (unit stride along rows or columns, leading dims in range)."""
    h, t = q.shape[1], q.shape[2]
    dh = q.shape[3]
    hkv, s = kt.shape[1], kt.shape[3]
    dv = v.shape[3]
    group = h // hkv
    scores = np.empty((t, s), dtype=np.float32)
    scratch = np.empty(s, dtype=np.int32)
    for i in range(i0, i1):
        bi, hi = i // h, i % h
        hk = hi // group
        qa, ka, va, oa = q[bi, hi], kt[bi, hk], v[bi, hk], out[bi, hi]
        _, lda = _ld(qa)
        tk, ldk = _ld(ka)
        tv, ldv = _ld(va)
        blas.sgemm(
            fn, blas.TRANS if tk else blas.NO_TRANS, t, s, dh,
            qa.ctypes.data, lda, ka.ctypes.data, ldk, scores.ctypes.data, s, 0.0,
        )  # fmt: skip
        mrow = m4[min(bi, m4.shape[0] - 1), min(hi, m4.shape[1] - 1)]
        softmax_rows(scores, mrow, has_mask, scale, nan_to_zero, scratch)
        blas.sgemm(
            fn, blas.TRANS if tv else blas.NO_TRANS, t, dv, s,
            scores.ctypes.data, s, va.ctypes.data, ldv, oa.ctypes.data, dv, 0.0,
        )  # fmt: skip


def _blas_views(q: np.ndarray, kt: np.ndarray, v: np.ndarray) -> bool:
    """Whether every per-head matrix can go to sgemm in place (q row-major)."""
    if not blas.SGEMM or not all(a.flags.aligned for a in (q, kt, v)):
        return False
    if q.size == 0 or kt.size == 0 or v.size == 0:
        return False
    tq, lq = _ld(q[0, 0])
    return tq == 0 and lq > 0 and _ld(kt[0, 0])[1] > 0 and _ld(v[0, 0])[1] > 0


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
    if _blas_views(q, kt, v):
        # one GIL-free kernel call per span of heads (no Python between heads)
        mk = _NO_MASK4 if m4 is None else m4
        has = m4 is not None
        fn = blas.SGEMM

        def native(i0: int, i1: int) -> None:
            _heads(fn, q, kt, v, mk, has, scale, nan_to_zero, out, i0, i1)

        parallel_for(native, b * h)
        return out

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
