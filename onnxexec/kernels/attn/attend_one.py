"""RoPE, KV-cache write and attention of one new token, bit for bit as llama.cpp.

- `rope_store_one`: RoPE of q and k (ggml_math.rope_rotate), k and v rounded to half
  into the float32 caches.
- `ATTEND_ONE` (parallel, serial): attention exactly as attention._attend_ggml computes
  it for T = 1. Per head: q * q_scale rounded to half; scores q.k in ggml_vec_dot_f16's
  order (ggml_simd_attn, the key row loaded once for all query heads of its KV head);
  softcap, scale, max, expf, the sum of 8-wide blocks in double, weights rounded to
  half; then out[d] = sum_j w[j] * v[j, d] as ggml_vec_dot_f16 over the cells: cell j
  < n32 goes to accumulator (j >> 3) & 3, lane j & 7 (= slot j & 31), summed in
  increasing j, reduced by reduce32; the cells from n32 on are added in double.
  The j loop is outermost there so each value row is read once, in order, for all
  query heads of its KV head, and the d loop innermost vectorizes; every slot still
  sums its terms in ggml's order, so the bits do not depend on the layout.
  Work is split over contiguous head ranges, one per thread (`attend_kernel` picks
  the twin).
"""

from __future__ import annotations

import math
from typing import Any, Final

import numba as nb
import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.attn.ggml_simd_attn import QK_HEADS, WV32
from onnxexec.kernels.math.ggml_math import expf_vec, f16_round, fma32, rope_cache_fill

PAR_MIN_ATTN: Final = tuning.ATTEND_ONE_PAR_MIN
_MAY_PARALLEL: Final = nb.config.NUMBA_NUM_THREADS > 1
# Head ranges per call: one per thread. A compile-time constant (numba.get_num_threads
# would keep the kernel out of the on-disk cache); it only decides the split.
_TASKS: Final = max(1, nb.config.NUMBA_NUM_THREADS)


@nb.njit(cache=True, nogil=True, inline="always")
def _rotate(x, o, cos, sin, head_dim, n_dims, neox, out):
    """rope_rotate of one head at x[o:o + head_dim] into out[o:...] (one position)."""
    half = n_dims // 2
    for d in range(n_dims, head_dim):
        out[o + d] = x[o + d]
    for i in range(half):
        a = o + i if neox else o + 2 * i
        b = a + half if neox else a + 1
        c = cos[0, i]
        s = sin[0, i]
        x0 = x[a]
        x1 = x[b]
        out[a] = fma32(x0, c, -np.float32(x1 * s))
        out[b] = fma32(x0, s, np.float32(x1 * c))


@nb.njit(cache=True, nogil=True)
def rope_store_one(
    qkv, q0, k0, v0, k_cache, v_cache, pos, head_dim, n_dims, base, freq_scale, neox, qr
):
    """One token: q, k, v = qkv[0, q0:], qkv[0, k0:], qkv[0, v0:] (H*Dh, Hkv*Dh, Hkv*Dh
    wide); RoPE at `pos` (q into qr (H*Dh,)), k and v half-rounded into cache row pos."""
    _, Hkv, Dh = k_cache.shape
    H = qr.shape[0] // Dh
    x = qkv[0]
    cos = np.empty((1, n_dims // 2), np.float32)
    sin = np.empty((1, n_dims // 2), np.float32)
    rope_cache_fill(pos, 1, n_dims, base, freq_scale, cos, sin)
    kr = np.empty(Hkv * Dh, np.float32)
    for h in range(H):
        _rotate(x[q0:], h * Dh, cos, sin, head_dim, n_dims, neox, qr)
    for h in range(Hkv):
        _rotate(x[k0:], h * Dh, cos, sin, head_dim, n_dims, neox, kr)
    for h in range(Hkv):
        for d in range(Dh):
            k_cache[pos, h, d] = f16_round(kr[h * Dh + d])
            v_cache[pos, h, d] = f16_round(x[v0 + h * Dh + d])


@nb.njit(cache=True, nogil=True, inline="always")
def reduce32(acc, c):
    """GGML_F32x8_REDUCE of 4 x 8 accumulators acc[r, l, c] (attention._reduce_vec_dot)."""
    t0 = np.float32(
        np.float32(
            np.float32(acc[0, 0, c] + acc[2, 0, c]) + np.float32(acc[1, 0, c] + acc[3, 0, c])
        )
        + np.float32(
            np.float32(acc[0, 4, c] + acc[2, 4, c]) + np.float32(acc[1, 4, c] + acc[3, 4, c])
        )
    )
    t1 = np.float32(
        np.float32(
            np.float32(acc[0, 1, c] + acc[2, 1, c]) + np.float32(acc[1, 1, c] + acc[3, 1, c])
        )
        + np.float32(
            np.float32(acc[0, 5, c] + acc[2, 5, c]) + np.float32(acc[1, 5, c] + acc[3, 5, c])
        )
    )
    t2 = np.float32(
        np.float32(
            np.float32(acc[0, 2, c] + acc[2, 2, c]) + np.float32(acc[1, 2, c] + acc[3, 2, c])
        )
        + np.float32(
            np.float32(acc[0, 6, c] + acc[2, 6, c]) + np.float32(acc[1, 6, c] + acc[3, 6, c])
        )
    )
    t3 = np.float32(
        np.float32(
            np.float32(acc[0, 3, c] + acc[2, 3, c]) + np.float32(acc[1, 3, c] + acc[3, 3, c])
        )
        + np.float32(
            np.float32(acc[0, 7, c] + acc[2, 7, c]) + np.float32(acc[1, 7, c] + acc[3, 7, c])
        )
    )
    return np.float32(np.float32(t0 + t1) + np.float32(t2 + t3))


@nb.njit(cache=True, nogil=True, inline="always")
def _softmax_row(s, e, lo, hi, base, scale, softcap, inv_cap):
    """Scores s[lo - base:hi - base] (softcap, scale) -> half-rounded softmax weights in
    place; the rest of the row (its 8-aligned padding) -> 0. e is a scratch row."""
    n = s.shape[0]
    if softcap > 0.0:
        for j in range(lo - base, hi - base):
            s[j] = np.float32(softcap * math.tanh(np.float32(s[j] * inv_cap)))
    m = np.float32(-np.inf)
    for j in range(lo - base, hi - base):
        x = np.float32(s[j] * scale)
        s[j] = x
        m = max(m, x)
    for j in range(lo - base, hi - base):
        e[j] = np.float32(s[j] - m)
    expf_vec(e[lo - base : hi - base], s[lo - base : hi - base])
    for j in range(lo - base):
        s[j] = np.float32(0.0)
    for j in range(hi - base, n):
        s[j] = np.float32(0.0)
    total = 0.0
    for c0 in range(0, n, 8):  # 8-lane partial sums of aligned blocks, added in double
        a0 = np.float32(s[c0] + s[c0 + 4])
        a1 = np.float32(s[c0 + 1] + s[c0 + 5])
        a2 = np.float32(s[c0 + 2] + s[c0 + 6])
        a3 = np.float32(s[c0 + 3] + s[c0 + 7])
        total += np.float64(np.float32(np.float32(a0 + a2) + np.float32(a1 + a3)))
    inv = np.float32(1.0 / total)
    for j in range(n):  # vectorized: f16_round is select code
        s[j] = f16_round(np.float32(s[j] * inv))


@nb.njit(cache=True, nogil=True, inline="always")
def attend_heads(qr, k_cache, v_cache, p, lo, q_scale, scale, softcap, n32, h0, h1, qv, s, e,
                  acc, a):  # fmt: skip
    """attend_token for query heads [h0, h1), with scratch rows qv, s, e, acc of them."""
    _, Hkv, Dh = k_cache.shape
    group = qv.shape[0] // Hkv
    base = lo & ~7
    d32 = Dh & ~31
    inv_cap = np.float32(1.0 / softcap) if softcap > 0.0 else np.float32(0.0)
    for h in range(h0, h1):
        for d in range(Dh):
            qq = qr[h * Dh + d]
            if q_scale != 1.0:
                qq = qq * q_scale
            qv[h, d] = f16_round(qq)
    for hk in range(h0 // group, (h1 - 1) // group + 1):
        g0 = max(h0, hk * group)
        g1 = min(h1, hk * group + group)
        QK_HEADS(k_cache, hk, qv, g0, g1 - g0, d32, s, base, s.shape[1] // 8, p, v_cache)
        if d32 < Dh:  # ggml_vec_dot_f16's leftovers, in double
            for h in range(g0, g1):
                for j in range(lo, p + 1):
                    s64 = np.float64(s[h, j - base])
                    for d in range(d32, Dh):
                        s64 += np.float64(np.float32(k_cache[j, hk, d] * qv[h, d]))
                    s[h, j - base] = np.float32(s64)
        for h in range(g0, g1):
            _softmax_row(s[h], e[h], lo, p + 1, base, scale, softcap, inv_cap)
        WV32(v_cache, hk, s, g0, g1 - g0, base, lo, min(p + 1, n32), acc)
        for h in range(g0, g1):
            ah = acc[h]
            out = a[0, h * Dh : h * Dh + Dh]
            for d in range(Dh):  # vectorized over d (reduce32 is inlined)
                out[d] = reduce32(ah, d)
            if p + 1 > max(lo, n32):
                for d in range(Dh):
                    rr = np.float64(out[d])
                    for j in range(max(lo, n32), p + 1):
                        rr += np.float64(np.float32(v_cache[j, hk, d] * s[h, j - base]))
                    out[d] = np.float32(rr)


@nb.njit(cache=True, nogil=True, inline="always")
def attend_scratch(qr, k_cache, pos, window):
    """lo (first cell), qv (H, Dh), s, e (H, nw) and acc (H, 4, 8, Dh) for attend_heads;
    the score rows start at cell lo & ~7 and are nw (a multiple of 8) cells wide."""
    Dh = k_cache.shape[2]
    H = qr.shape[0] // Dh
    lo = pos - window + 1 if window > 0 and pos - window + 1 > 0 else 0
    nw = (pos + 1 - (lo & ~7) + 7) & ~7
    qv = np.empty((H, Dh), np.float32)
    s = np.empty((H, nw), np.float32)
    e = np.empty((H, nw), np.float32)
    acc = np.empty((H, 4, 8, Dh), np.float32)
    return lo, qv, s, e, acc


@nb.njit(parallel=True, cache=True, nogil=True)
def attend_token(qr, k_cache, v_cache, pos, q_scale, scale, window, softcap, n_kv, a):
    """Attention of one token's rotated queries qr (H*Dh,) over cache cells [0, pos]
    into a (1, H*Dh), exactly as attention._attend_ggml for T = 1 (module docstring);
    contiguous head ranges, one per thread."""
    H = a.shape[1] // k_cache.shape[2]
    lo, qv, s, e, acc = attend_scratch(qr, k_cache, pos, window)
    nt = min(H, _TASKS)
    for t in nb.prange(nt):  # each range writes its own heads' rows and slice of a
        attend_heads(qr, k_cache, v_cache, pos, lo, q_scale, scale, softcap, n_kv & ~31,
                      t * H // nt, (t + 1) * H // nt, qv, s, e, acc, a)  # fmt: skip


@nb.njit(cache=True, nogil=True)
def _attend_one_serial(qr, k_cache, v_cache, pos, q_scale, scale, window, softcap, n_kv, a):
    """attend_token on the calling thread, all heads in one range."""
    H = a.shape[1] // k_cache.shape[2]
    lo, qv, s, e, acc = attend_scratch(qr, k_cache, pos, window)
    attend_heads(qr, k_cache, v_cache, pos, lo, q_scale, scale, softcap, n_kv & ~31, 0, H,
                  qv, s, e, acc, a)  # fmt: skip


ATTEND_ONE: Final = (attend_token, _attend_one_serial)
"""(parallel, serial) one-token attention kernels, same signature and bits."""


def attend_kernel(width: int, span: int) -> Any:
    """The ATTEND_ONE kernel for H*Dh = width queries over `span` cells."""
    if width * span >= PAR_MIN_ATTN and _MAY_PARALLEL:
        return ATTEND_ONE[0]
    return ATTEND_ONE[1]
