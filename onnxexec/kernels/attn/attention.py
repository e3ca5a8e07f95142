"""Causal grouped-query attention over a preallocated KV cache (numba).

Shapes: T new tokens at positions pos..pos+T-1; H query heads, Hkv cache heads,
Dh head size; the cache holds positions [0, pos+T). Masking follows llama.cpp's
(llama-hparams.h is_masked_swa, LLAMA_SWA_TYPE_STANDARD): query position p may
see cache position j when j <= p and, with a window W > 0, p - j < W.

Two numerics:
- float (`ggml=False`): float32 dot products, softmax with float64 sums.
- ggml (`ggml=True`): bit-exact with llama.cpp's default CPU path (F16 KV cache, no
  flash attention; llama-graph.cpp build_attn_mha): the caller stores half-rounded k/v;
  q and the softmax probabilities are rounded to half (ggml_mul_mat converts the f32
  operand to the cache's vec_dot type); scores are soft-capped, scaled, and
  exponentiated with ggml_v_expf over rows of n_kv = max(256, pos+T rounded up to 256)
  cache cells (capped at the cache size; llama_kv_cache::get_n_kv), each 8-wide chunk
  summed in float and the chunk sums in double (ggml_vec_soft_max_f32). The two
  matrix products sum in ggml's order: for T >= 2 llamafile's tinyBLAS (8 lanes,
  lane l takes k = l, l+8, ...; reduced as (a0+a2)+(a1+a3) with a_i = l_i + l_{i+4}),
  for T = 1 ggml_vec_dot_f16 (4 x 8 accumulators over 32-wide steps; reduced pairwise
  (0+2, 1+3, then 0+1), then (t0+t1)+(t2+t3), leftovers added in double). Products of
  two halves are exact in float32, so each fused multiply-add is a float32 add.
  Prompts (T >= 2, the tinyBLAS case) run `_attend_prompt`: the same sums with cells
  (scores, softmax) or head dims (P @ V) innermost so numba vectorizes them, over
  (head, row block) items split by native/parallel.py.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.ggml_math import expf, expf_vec, f16_round
from onnxexec.kernels.math.lanes import twins
from onnxexec.kernels.quant.fp16 import round_to_f16
from onnxexec.native.parallel import parallel_for

PAR_MIN_WORK = tuning.ATTN_PAR_MIN_WORK  # multiply-adds from which the parallel kernels pay off


@nb.njit(cache=True, nogil=True, inline="always")
def _hsum_tiny(lanes):
    """tinyBLAS hsum of an 8-lane accumulator."""
    a0 = np.float32(lanes[0] + lanes[4])
    a1 = np.float32(lanes[1] + lanes[5])
    a2 = np.float32(lanes[2] + lanes[6])
    a3 = np.float32(lanes[3] + lanes[7])
    return np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))


@nb.njit(cache=True, nogil=True, inline="always")
def _reduce_vec_dot(acc):
    """GGML_F32x8_REDUCE of 4 x 8 accumulators (ggml_vec_dot_f16 on AVX2)."""
    t = np.empty(4, np.float32)
    for i in range(4):
        lo = np.float32(np.float32(acc[0, i] + acc[2, i]) + np.float32(acc[1, i] + acc[3, i]))
        hi = np.float32(
            np.float32(acc[0, i + 4] + acc[2, i + 4]) + np.float32(acc[1, i + 4] + acc[3, i + 4])
        )
        t[i] = np.float32(lo + hi)
    return np.float32(np.float32(t[0] + t[1]) + np.float32(t[2] + t[3]))


def _attend_ggml(q, k_cache, v_cache, pos, scale, window, softcap, n_kv, out):
    """See the module docstring; q (T, H*Dh), caches (C, Hkv, Dh) holding halves.

    Cells outside [lo, p] have probability 0 and add exact zeros to any lane, so the
    loops skip them; lanes and chunks are still numbered from cell 0.
    """
    T = q.shape[0]
    Hkv = k_cache.shape[1]
    Dh = k_cache.shape[2]
    H = q.shape[1] // Dh
    group = H // Hkv
    # llamafile_sgemm handles T >= 2 when k % 8 == 0 and m % 4 == 0, else ggml_vec_dot
    tiny_kq = T > 1 and Dh % 8 == 0 and n_kv % 4 == 0
    tiny_kqv = T > 1 and n_kv % 8 == 0 and Dh % 4 == 0
    n32 = n_kv & ~31
    for th in nb.prange(T * H):  # each (t, h) writes its own slice of out: no races
        t = th // H
        h = th % H
        hk = h // group
        p = pos + t
        lo = p - window + 1 if window > 0 and p - window + 1 > 0 else 0
        qo = h * Dh
        qv = np.empty(Dh, np.float32)
        for d in range(Dh):
            qv[d] = round_to_f16(q[t, qo + d])
        w = np.zeros(p + 1, np.float32)  # scores, then probabilities
        m = np.float32(-np.inf)
        lanes = np.zeros(8, np.float32)
        acc = np.zeros((4, 8), np.float32)
        for j in range(lo, p + 1):
            kr = k_cache[j, hk]
            if tiny_kq:  # lane l sums d = l, l+8, ... (8 independent chains: vectorizes)
                lanes[:] = 0.0
                for d0 in range(0, Dh, 8):
                    for ln in range(8):
                        lanes[ln] += kr[d0 + ln] * qv[d0 + ln]
                s = _hsum_tiny(lanes)
            else:
                acc[:] = 0.0
                d32 = Dh & ~31
                for d0 in range(0, d32, 32):
                    for a in range(4):
                        for ln in range(8):
                            acc[a, ln] += kr[d0 + 8 * a + ln] * qv[d0 + 8 * a + ln]
                s64 = np.float64(_reduce_vec_dot(acc))
                for d in range(d32, Dh):
                    s64 += np.float64(np.float32(kr[d] * qv[d]))
                s = np.float32(s64)
            if softcap > 0.0:
                s = np.float32(softcap * math.tanh(np.float32(s * np.float32(1.0 / softcap))))
            s = np.float32(s * scale)
            w[j] = s
            m = max(m, s)
        total = 0.0
        e = np.zeros(8, np.float32)
        for c in range(lo // 8 * 8, p + 1, 8):  # 8-wide chunks from cell 0
            for i in range(8):
                j = c + i
                e[i] = 0.0
                if lo <= j <= p:
                    e[i] = expf(np.float32(w[j] - m))
                    w[j] = e[i]
            total += np.float64(_hsum_tiny(e))
        inv = np.float32(1.0 / total)
        for j in range(lo, p + 1):
            w[j] = round_to_f16(np.float32(w[j] * inv))
        # the P @ V lanes are laid out [lane..., d] so the inner loop runs over d
        if tiny_kqv:
            lanes2 = np.zeros((8, Dh), np.float32)
            for j in range(lo, p + 1):
                wj = w[j]
                lj = lanes2[j & 7]
                for d in range(Dh):
                    lj[d] += v_cache[j, hk, d] * wj
            for d in range(Dh):
                out[t, qo + d] = _hsum_tiny(lanes2[:, d])
        else:
            acc2 = np.zeros((4, 8, Dh), np.float32)
            for j in range(lo, min(p + 1, n32)):
                wj = w[j]
                aj = acc2[(j >> 3) & 3, j & 7]
                for d in range(Dh):
                    aj[d] += v_cache[j, hk, d] * wj
            for d in range(Dh):
                r = np.float64(_reduce_vec_dot(acc2[:, :, d]))
                for j in range(max(lo, n32), p + 1):
                    r += np.float64(np.float32(v_cache[j, hk, d] * w[j]))
                out[t, qo + d] = np.float32(r)


@nb.njit(cache=True, nogil=True)
def _k_transposed(k_cache, n):
    """Cells [0, n) of a (C, Hkv, Dh) cache as (Hkv, Dh, n rounded up to 8), zero-padded,
    so that _attend_prompt's score loops run over cells with unit stride."""
    _, Hkv, Dh = k_cache.shape
    n8 = (n + 7) // 8 * 8
    kt = np.zeros((Hkv, Dh, n8), np.float32)
    for hk in range(Hkv):
        for j in range(n):
            for d in range(Dh):
                kt[hk, d, j] = k_cache[j, hk, d]
    return kt


@nb.njit(cache=True, nogil=True)
def _attend_prompt(q, kt, v_cache, pos, scale, window, softcap, rows, i0, i1, out):
    """_attend_ggml for T >= 2 on the tinyBLAS path (Dh % 8 == 0, n_kv % 8 == 0) with the
    same sums in loops that vectorize, for work items [i0, i1): item i is head i % H and
    query-row block (of `rows` rows) number i // H taken zigzag (first, last, second,
    ...) so that any run of items has about the same causal work.

    Per query row: the 8 score lanes over all its cells at once against K transposed
    (kt from _k_transposed; lane l of cell j adds d = l, l+8, ... in order, as tinyBLAS;
    computed over whole 8-cell chunks, the cells outside [lo, p] are ignored), the
    softmax over the row (expf_vec, f16_round), then P @ V with d innermost. Inner
    loops run from 0 over slices: numba then drops its negative-index wraparound and
    LLVM vectorizes them.
    """
    T = q.shape[0]
    Hkv, Dh, n8 = kt.shape
    H = q.shape[1] // Dh
    group = H // Hkv
    n_blocks = (T + rows - 1) // rows
    inv_cap = np.float32(1.0 / softcap) if softcap > 0.0 else np.float32(0.0)
    lanes = np.empty((8, n8), np.float32)
    s = np.empty(n8, np.float32)
    w = np.empty(n8, np.float32)
    qv = np.empty(Dh, np.float32)
    acc = np.empty(8 * Dh, np.float32)  # P @ V lane l of dim d at l * Dh + d
    for it in range(i0, i1):
        h = it % H
        r = it // H
        blk = r // 2 if r % 2 == 0 else n_blocks - 1 - r // 2
        hk = h // group
        qo = h * Dh
        for t in range(blk * rows, min(T, blk * rows + rows)):
            p = pos + t
            lo = p - window + 1 if window > 0 and p - window + 1 > 0 else 0
            c0 = lo // 8 * 8
            c1 = (p + 8) // 8 * 8
            nc = c1 - c0
            qt = q[t, qo : qo + Dh]
            for d in range(Dh):
                qv[d] = f16_round(qt[d])
            for ln in range(8):
                lr = lanes[ln, c0:c1]
                x = qv[ln]
                kr = kt[hk, ln, c0:c1]
                for j in range(nc):
                    lr[j] = np.float32(0.0) + kr[j] * x
                for d in range(8 + ln, Dh, 8):
                    x = qv[d]
                    kr = kt[hk, d, c0:c1]
                    for j in range(nc):
                        lr[j] += kr[j] * x
            nj = p + 1 - lo
            sr = s[lo : p + 1]
            l0 = lanes[0, lo : p + 1]
            l1 = lanes[1, lo : p + 1]
            l2 = lanes[2, lo : p + 1]
            l3 = lanes[3, lo : p + 1]
            l4 = lanes[4, lo : p + 1]
            l5 = lanes[5, lo : p + 1]
            l6 = lanes[6, lo : p + 1]
            l7 = lanes[7, lo : p + 1]
            for j in range(nj):  # _hsum_tiny of the 8 lanes
                a0 = np.float32(l0[j] + l4[j])
                a1 = np.float32(l1[j] + l5[j])
                a2 = np.float32(l2[j] + l6[j])
                a3 = np.float32(l3[j] + l7[j])
                sr[j] = np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))
            if softcap > 0.0:
                for j in range(nj):
                    sr[j] = np.float32(softcap * math.tanh(np.float32(sr[j] * inv_cap)))
            m = np.float32(-np.inf)
            for j in range(nj):
                sr[j] = np.float32(sr[j] * scale)
                m = max(m, sr[j])
            for j in range(nj):
                sr[j] = np.float32(sr[j] - m)
            wr = w[lo : p + 1]
            expf_vec(sr, wr)
            w[c0:lo] = 0.0
            w[p + 1 : c1] = 0.0
            total = 0.0
            for c in range(c0, c1, 8):  # 8-wide chunks from cell 0, summed as _hsum_tiny
                a0 = np.float32(w[c] + w[c + 4])
                a1 = np.float32(w[c + 1] + w[c + 5])
                a2 = np.float32(w[c + 2] + w[c + 6])
                a3 = np.float32(w[c + 3] + w[c + 7])
                total += np.float64(np.float32(np.float32(a0 + a2) + np.float32(a1 + a3)))
            inv = np.float32(1.0 / total)
            for j in range(nj):
                wr[j] = f16_round(np.float32(wr[j] * inv))
            acc[:] = 0.0
            for j in range(lo, p + 1):
                wj = w[j]
                aj = acc[(j & 7) * Dh : (j & 7) * Dh + Dh]
                vr = v_cache[j, hk]
                for d in range(Dh):
                    aj[d] += vr[d] * wj
            ot = out[t, qo : qo + Dh]
            for d in range(Dh):
                a0 = np.float32(acc[d] + acc[4 * Dh + d])
                a1 = np.float32(acc[Dh + d] + acc[5 * Dh + d])
                a2 = np.float32(acc[2 * Dh + d] + acc[6 * Dh + d])
                a3 = np.float32(acc[3 * Dh + d] + acc[7 * Dh + d])
                ot[d] = np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))


def _attend(q, k_cache, v_cache, pos, scale, window, softcap, out):
    """Float path: out[t, h] = softmax(scale * q_th . K^T) V over the visible cells."""
    T = q.shape[0]
    Hkv = k_cache.shape[1]
    Dh = k_cache.shape[2]
    H = q.shape[1] // Dh
    group = H // Hkv
    for th in nb.prange(T * H):
        t = th // H
        h = th % H
        hk = h // group
        p = pos + t
        lo = p - window + 1 if window > 0 and p - window + 1 > 0 else 0
        scores = np.empty(p + 1 - lo, dtype=np.float32)
        qo = h * Dh
        m = np.float32(-np.inf)
        for j in range(lo, p + 1):
            s = np.float32(0.0)
            for d in range(Dh):
                s += q[t, qo + d] * k_cache[j, hk, d]
            if softcap > 0.0:
                s = np.float32(softcap * math.tanh(s / softcap))
            s *= scale
            scores[j - lo] = s
            m = max(m, s)
        total = 0.0
        for j in range(p + 1 - lo):
            e = np.float32(math.exp(scores[j] - m))
            scores[j] = e
            total += e
        inv = np.float32(1.0 / total)
        for d in range(Dh):
            out[t, qo + d] = 0.0
        for j in range(lo, p + 1):
            wj = scores[j - lo] * inv
            for d in range(Dh):
                out[t, qo + d] += wj * v_cache[j, hk, d]


_ATTEND_GGML = twins(_attend_ggml)
_ATTEND = twins(_attend)
PROMPT_ROWS = tuning.ATTN_PROMPT_ROWS  # query rows per work item of _attend_prompt


def _prompt_attention(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: int,
    scale: float,
    window: int,
    softcap: float,
    par: bool,
    out: np.ndarray,
) -> None:
    """_attend_prompt over all (head, row block) items, split across native/parallel.py's
    pool when `par`: its caller never waits for a worker that has not started, which
    numba's static prange schedule does on a busy machine."""
    T = q.shape[0]
    H = q.shape[1] // k_cache.shape[2]
    kt = _k_transposed(k_cache, pos + T)
    args = (q, kt, v_cache, pos, np.float32(scale), window, np.float32(softcap), PROMPT_ROWS)
    n_items = H * -(-T // PROMPT_ROWS)

    def span(i0: int, i1: int) -> None:
        _attend_prompt(*args, i0, i1, out)

    if par:
        parallel_for(span, n_items)
    else:
        span(0, n_items)


def ggml_n_kv(pos: int, T: int, cache_size: int) -> int:
    """Cells llama.cpp attends over: max(256, pos+T rounded up to 256), capped at the cache."""
    return min(cache_size, max(256, -(-(pos + T) // 256) * 256))


def kv_attention(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: int,
    scale: float,
    window: int = 0,
    softcap: float = 0.0,
    ggml: bool = False,
) -> np.ndarray:
    """(T, H*Dh) f32 queries at positions pos.. over a (C, Hkv, Dh) cache -> (T, H*Dh).

    Checked (ValueError): q 2-D, two caches of one 3-D shape, Hkv, Dh >= 1, H*Dh a
    multiple of Hkv*Dh, 0 <= pos, pos + T <= C, window >= 0."""
    bad = q.ndim != 2 or k_cache.ndim != 3 or v_cache.shape != k_cache.shape
    if bad or not k_cache.shape[1] or not k_cache.shape[2] or window < 0:
        shapes = f"{list(q.shape)}, caches {list(k_cache.shape)} / {list(v_cache.shape)}"
        raise ValueError(f"kv_attention: queries {shapes}, window {window}")
    T, HD = q.shape
    C, Hkv, Dh = k_cache.shape
    if q.dtype != np.float32 or k_cache.dtype != np.float32 or v_cache.dtype != np.float32:
        raise ValueError("kv_attention expects float32 queries and caches")
    if HD % Dh or (HD // Dh) % Hkv:
        raise ValueError(f"query width {HD} is not a multiple of Hkv*Dh = {Hkv}*{Dh}")
    if pos < 0 or pos + T > C:
        raise ValueError(f"positions [{pos}, {pos + T}) exceed the KV cache size {C}")
    out = np.empty_like(q)
    q = np.ascontiguousarray(q)
    span = pos + T if not window else min(window, pos + T)
    par = T * HD * span >= PAR_MIN_WORK
    n_kv = ggml_n_kv(pos, T, C)
    if ggml and T > 1 and Dh % 8 == 0 and n_kv % 8 == 0:
        _prompt_attention(q, k_cache, v_cache, pos, scale, window, softcap, par, out)
    elif ggml:
        kern = _ATTEND_GGML[0] if par else _ATTEND_GGML[1]
        kern(
            q,
            k_cache,
            v_cache,
            pos,
            np.float32(scale),
            window,
            np.float32(softcap),
            n_kv,
            out,
        )
    else:
        kern = _ATTEND[0] if par else _ATTEND[1]
        kern(q, k_cache, v_cache, pos, np.float32(scale), window, np.float32(softcap), out)
    return out
