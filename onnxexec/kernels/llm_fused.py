"""Serial kernels that glue the quantized matmuls of a decoder layer together.

Each one replaces a chain of small ops (and their numpy temporaries, thread-pool
wake-ups and executor steps) with one call, computing bit for bit what the chain
computes - the same float32 operations in the same order:
- `norm_quant`: RMSNorm (ops/llm.py rms_norm: squares in f32 summed in f64 in index
  order, mean and 1/sqrt in f32, (x * scale) * w), then the int8 activation blocks of
  actquant.quantize_act.
- `swiglu_quant`: ggml's SwiGLU (ggml_math.silu_mul) on a fused gate|up product, then
  quantize_act.
- `rope_store_one` + `ATTEND_ONE`: one new token: RoPE of q and k
  (ggml_math.rope_rotate), k and v rounded to half into the caches, then attention
  exactly as attention._attend_ggml computes it for T = 1 (ggml_vec_dot_f16
  summation order), the heads in parallel. q.k is ggml_simd_attn.QK32 (8-wide vector
  code on AVX2 hosts); the other lane loops are laid out so the vectorizer can run
  them; each accumulator cell still sums its terms in ggml's order.
"""

from __future__ import annotations

import math
from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.actquant import quantize_act, quantize_act8, quantize_act_into
from onnxexec.kernels.ggml_dot_k import quantize_q8_k
from onnxexec.kernels.ggml_math import (
    _LN2_HI,
    _LN2_LO,
    _LOG2E,
    _P0,
    _P1,
    _P2,
    _P3,
    _P4,
    _R,
    _rope_cache,
    expf,
    fma32,
)
from onnxexec.kernels.ggml_simd_attn import QK32
from onnxexec.kernels.lanes import twins

_F16_MIN_NORMAL: Final = 0x38800000  # float32 bits of 2^-14
_F32_INF: Final = 0x7F800000


@nb.njit(cache=True, nogil=True)
def f16_round(x):
    """fp16.round_to_f16 bit for bit (including its +0 for -0), with integer operations
    instead of frexp/ldexp calls: round-to-nearest-even of the 13 dropped mantissa bits."""
    a = np.uint32(np.float32(x).view(np.uint32) & np.uint32(0x7FFFFFFF))  # numba widens ints
    if a >= np.uint32(_F32_INF):
        return x
    if a < np.uint32(_F16_MIN_NORMAL):  # subnormal halves: spacing 2^-24, exact in f32
        r = np.float32(
            np.rint(np.uint32(a).view(np.float32) * np.float32(2.0**24)) * np.float32(2.0**-24)
        )
    else:
        b = np.uint32(
            (a + np.uint32(0xFFF) + ((a >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
        )
        r = np.uint32(b).view(np.float32)
        if r > np.float32(65504.0):
            r = np.float32(np.inf)
    return -r if x < 0 else r


@nb.njit(cache=True, nogil=True)
def expf_into(x, out):
    """out[i] = ggml_math.expf(x[i]) bit for bit, 1-D float32 arrays, in a loop the
    compiler vectorizes: the common case (2^n a normal float32) for every element
    branch-free, then the rare others again through expf."""
    special = 0
    for i in range(x.shape[0]):
        xi = x[i]
        z = fma32(xi, _LOG2E, _R)
        n = np.float32(z - _R)
        b = fma32(-n, _LN2_LO, fma32(-n, _LN2_HI, xi))
        u = np.float32(b * b)
        j = fma32(fma32(fma32(_P0, b, _P1), u, fma32(_P2, b, _P3)), u, np.float32(_P4 * b))
        ok = abs(n) <= np.float32(126.0)
        e = np.int32(n) if ok else np.int32(0)
        k = np.uint32(np.uint32(e + 127) << np.uint32(23)).view(np.float32)
        out[i] = fma32(j, k, k)
        special |= 0 if ok else 1
    if special:
        for i in range(x.shape[0]):
            if not abs(np.float32(np.float32(fma32(x[i], _LOG2E, _R)) - _R)) <= 126.0:
                out[i] = expf(x[i])


@nb.njit(cache=True, nogil=True)
def _rms_rows(x, w, eps, h):
    """h = RMSNorm(x) * w row by row (see the module docstring for the rounding)."""
    T, n = x.shape
    for t in range(T):
        total = 0.0
        for i in range(n):
            total += np.float64(np.float32(x[t, i] * x[t, i]))
        mean = np.float32(total / n)
        scale = np.float32(1.0) / np.sqrt(np.float32(mean + eps))
        for i in range(n):
            h[t, i] = np.float32(x[t, i] * scale) * w[i]


@nb.njit(cache=True, nogil=True)
def norm_quant(x, w, eps, h):
    """x (T, D) f32, w (D,) -> h = RMSNorm(x) * w into h (T, D); returns quantize_act(h)."""
    _rms_rows(x, w, eps, h)
    return quantize_act(h)


@nb.njit(cache=True, nogil=True)
def norm_quant8(x, w, eps, h):
    """norm_quant with int8 values (actquant.quantize_act8)."""
    _rms_rows(x, w, eps, h)
    return quantize_act8(h)


@nb.njit(cache=True, nogil=True)
def quant_into(x, block, kq, x8, xst, xk8, xkd, xkbs):
    """The activations of one decode matmul group, into preallocated buffers: x (T, K)
    -> quantize_act8(x) into (x8, xst) when `block`, ggml_dot_k.quantize_q8_k8(x, 0)
    into (xk8, xkd, xkbs) when `kq` (same values: both only cast or copy)."""
    if block:
        quantize_act_into(x, x8, xst)
    if kq:
        qs, d, bs = quantize_q8_k(x, 0)
        for t in range(qs.shape[0]):
            for i in range(qs.shape[1]):
                xk8[t, i] = qs[t, i]  # |q| <= 127
            for i in range(d.shape[1]):
                xkd[t, i] = d[t, i]
            for i in range(bs.shape[1]):
                xkbs[t, i] = bs[t, i]


@nb.njit(cache=True, nogil=True)
def norm_quant_into(x, w, eps, h, block, kq, x8, xst, xk8, xkd, xkbs):
    """h = RMSNorm(x) * w, then quant_into(h, ...): one call per decode matmul group."""
    _rms_rows(x, w, eps, h)
    quant_into(h, block, kq, x8, xst, xk8, xkd, xkbs)


@nb.njit(cache=True, nogil=True)
def swiglu_quant_into(g, u, f, block, kq, x8, xst, xk8, xkd, xkbs):
    """f = silu(g) * u (as swiglu_quant), then quant_into(f, ...)."""
    _swiglu_rows(g, u, f)
    quant_into(f, block, kq, x8, xst, xk8, xkd, xkbs)


@nb.njit(cache=True, nogil=True)
def swiglu_quant(g, u, f):
    """f = silu(g) * u, all (T, F) f32, as ggml_math.silu_mul rounds it; returns
    quantize_act(f)."""
    _swiglu_rows(g, u, f)
    return quantize_act(f)


@nb.njit(cache=True, nogil=True)
def swiglu_quant8(g, u, f):
    """swiglu_quant with int8 values (actquant.quantize_act8)."""
    _swiglu_rows(g, u, f)
    return quantize_act8(f)


@nb.njit(cache=True, nogil=True)
def _swiglu_rows(g, u, f):
    T, F = f.shape
    neg = np.empty(F, np.float32)
    e = np.empty(F, np.float32)
    for t in range(T):
        for i in range(F):
            neg[i] = np.float32(0.0) - g[t, i]
        expf_into(neg, e)
        for i in range(F):
            f[t, i] = np.float32(g[t, i] / (np.float32(1.0) + e[i])) * u[t, i]


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


@nb.njit(cache=True, nogil=True, inline="always")
def _reduce32(acc, c):
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
    _rope_cache(pos, 1, n_dims, base, freq_scale, cos, sin)
    kr = np.empty(Hkv * Dh, np.float32)
    for h in range(H):
        _rotate(x[q0:], h * Dh, cos, sin, head_dim, n_dims, neox, qr)
    for h in range(Hkv):
        _rotate(x[k0:], h * Dh, cos, sin, head_dim, n_dims, neox, kr)
    for h in range(Hkv):
        for d in range(Dh):
            k_cache[pos, h, d] = f16_round(kr[h * Dh + d])
            v_cache[pos, h, d] = f16_round(x[v0 + h * Dh + d])


def _attend_one(qr, k_cache, v_cache, pos, q_scale, scale, window, softcap, n_kv, a):
    """Attention of one token's rotated queries qr (H*Dh,) over cache cells [0, pos]
    into a (1, H*Dh), exactly as attention._attend_ggml for T = 1; heads in parallel."""
    _, Hkv, Dh = k_cache.shape
    H = qr.shape[0] // Dh
    group = H // Hkv
    p = pos
    lo = p - window + 1 if window > 0 and p - window + 1 > 0 else 0
    n32 = n_kv & ~31
    d32 = Dh & ~31
    inv_cap = np.float32(1.0 / softcap) if softcap > 0.0 else np.float32(0.0)
    for h in nb.prange(H):  # each head writes its own slice of a
        qv = np.empty(Dh, np.float32)
        w = np.empty(p + 1, np.float32)
        dj = np.empty(p + 1, np.float32)
        e = np.empty(8, np.float32)
        acc2 = np.zeros((4, 8, Dh), np.float32)
        red = np.empty(Dh, np.float32)
        hk = h // group
        qo = h * Dh
        for d in range(Dh):
            qq = qr[qo + d]
            if q_scale != 1.0:
                qq = qq * q_scale
            qv[d] = f16_round(qq)
        m = np.float32(-np.inf)
        for j in range(lo, p + 1):
            # ggml_vec_dot_f16's 4 x 8 accumulators over d < d32, then the leftovers
            s64 = np.float64(QK32(k_cache, j, hk, qv, d32))
            for d in range(d32, Dh):
                s64 += np.float64(np.float32(k_cache[j, hk, d] * qv[d]))
            s = np.float32(s64)
            if softcap > 0.0:
                s = np.float32(softcap * math.tanh(np.float32(s * inv_cap)))
            s = np.float32(s * scale)
            w[j] = s
            m = max(m, s)
        for j in range(lo, p + 1):
            dj[j] = np.float32(w[j] - m)
        expf_into(dj[lo : p + 1], w[lo : p + 1])
        total = 0.0
        for c0 in range(lo // 8 * 8, p + 1, 8):
            for i in range(8):
                j = c0 + i
                e[i] = w[j] if lo <= j <= p else np.float32(0.0)
            a0 = np.float32(e[0] + e[4])
            a1 = np.float32(e[1] + e[5])
            a2 = np.float32(e[2] + e[6])
            a3 = np.float32(e[3] + e[7])
            total += np.float64(np.float32(np.float32(a0 + a2) + np.float32(a1 + a3)))
        inv = np.float32(1.0 / total)
        for j in range(lo, p + 1):
            w[j] = f16_round(np.float32(w[j] * inv))
        for j in range(lo, min(p + 1, n32)):
            wj = w[j]
            aj = acc2[(j >> 3) & 3, j & 7]
            vj = v_cache[j, hk]
            for d in range(Dh):
                aj[d] += vj[d] * wj
        for d in range(Dh):  # a loop of its own: vectorized over d (_reduce32 is inlined)
            red[d] = _reduce32(acc2, d)
        for d in range(Dh):
            rr = np.float64(red[d])
            for j in range(max(lo, n32), p + 1):
                rr += np.float64(np.float32(v_cache[j, hk, d] * w[j]))
            a[0, qo + d] = np.float32(rr)


ATTEND_ONE = twins(_attend_one)
