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

import numpy as np

from onnxexec.kernels import bounds
from onnxexec.kernels import objload as nb
from onnxexec.kernels.attn.mha_job import (
    ATTN_ARGS,
    NAN_TO_ZERO,
    TRANS_K,
    TRANS_V,
    attn_span,
    softmax_rows,
)
from onnxexec.kernels.linalg import blas
from onnxexec.native.parallel import (
    ARGS,
    KIND_ATTN,
    MAX_SPANS,
    native_pool,
    num_threads,
    parallel_for,
)

f32 = np.float32
_NO_MASK = np.zeros((1, 1), dtype=np.float32)


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


def _blas_views(q: np.ndarray, kt: np.ndarray, v: np.ndarray) -> bool:
    """Whether every per-head matrix can go to sgemm in place (q row-major)."""
    ok = all(a.flags.aligned and a.dtype == np.float32 for a in (q, kt, v))
    if not blas.SGEMM or not ok:  # the native job reads float32 through raw addresses
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
    v (B, Hkv, S, Dv), additive mask broadcastable to (B, H, T, S) -> (B, H, T, Dv).

    Preconditions (checked, ValueError otherwise): q, kt, v 4-D with the shapes above,
    Hkv >= 1 dividing H; the mask broadcastable. Only float32 operands run natively."""
    for name, a in (("q", q), ("k^T", kt), ("v", v)):
        bounds.rank("attention", name, a, 4)
    b, h, t, dh = q.shape
    hkv, s = kt.shape[1], kt.shape[3]
    if kt.shape[0] != b or kt.shape[2] != dh or v.shape[:3] != (b, hkv, s) or not hkv or h % hkv:
        raise ValueError(
            f"attention: q {list(q.shape)}, k^T {list(kt.shape)}, v {list(v.shape)} do not fit"
        )
    group = h // hkv
    out = np.empty((b, h, t, v.shape[3]), dtype=np.float32)
    m4 = None
    if mask is not None:
        m4 = np.broadcast_to(mask.astype(np.float32, copy=False), (b, h, t, s))
    if _blas_views(q, kt, v):
        _native(q, kt, v, m4, scale, nan_to_zero, out)
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


def _native(
    q: np.ndarray,
    kt: np.ndarray,
    v: np.ndarray,
    m4: np.ndarray | None,
    scale: float,
    nan_to_zero: bool,
    out: np.ndarray,
) -> None:
    """attention() on per-head BLAS views: spans of heads as a native pool job
    (kernels/attn/mha_job.py), or on this thread when the pool is busy or absent. m4 is
    the float32 mask broadcast to (B, H, T, S), or None."""
    b, h, t, dh = q.shape
    hkv, s = kt.shape[1], kt.shape[3]
    flags = NAN_TO_ZERO if nan_to_zero else 0
    _, ldq = _ld(q[0, 0])
    tk, ldk = _ld(kt[0, 0])
    tv, ldv = _ld(v[0, 0])
    flags |= (TRANS_K if tk else 0) | (TRANS_V if tv else 0)
    mk, mbh = None, 0
    if m4 is not None:
        # batch / head axes the mask broadcasts over (stride 0) stay of size 1
        mb, mh = (1 if m4.strides[0] == 0 else b), (1 if m4.strides[1] == 0 else h)
        mk = np.ascontiguousarray(m4[:mb, :mh])
        mbh = mb * 65536 + mh
    st = [x // 4 for x in (*q.strides[:2], *kt.strides[:2], *v.strides[:2])]
    args = np.array(
        [
            blas.SGEMM, flags, q.ctypes.data, st[0], st[1], ldq, h, t, dh,
            kt.ctypes.data, st[2], st[3], ldk, hkv, s,
            v.ctypes.data, st[4], st[5], ldv, v.shape[3],
            0 if mk is None else mk.ctypes.data, mbh, out.ctypes.data,
        ],
        dtype=np.int64,
    )  # fmt: skip
    fa = np.array([scale], dtype=np.float64)
    heads = b * h
    pool = native_pool() if heads > 1 else None
    if pool is None:
        attn_span(args, fa, 0, heads)
        return
    try:
        pool.ctrl[ARGS : ARGS + ATTN_ARGS] = args
        pool.fctrl[0] = scale
        parts = min(heads, MAX_SPANS, 2 * num_threads())
        spans = np.array([heads * i // parts for i in range(parts + 1)], dtype=np.int64)
        pool.run_native(KIND_ATTN, spans)
    finally:
        pool.busy.release()


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
