"""K-quant weights (Q2_K .. Q6_K) x Q8_K activations, summed in llama.cpp's order.

llama.cpp quantizes the activations of K-quant matmuls to Q8_K (quantize_row_q8_K_ref,
ggml-quants.c): per 256 values, max = the value of largest magnitude (first one),
iscale = -127 / max, q = min(127, nearest_int(iscale * x)) (round half to even of the
float32 product), d = 1 / iscale (float32), bsums = sums of 16 q's.

ggml_vec_dot_q*_K_q8_K (ggml-cpu/arch/x86/quants.c, AVX2): per super-block the
integer products are summed exactly into 8 int32 lanes, lane l holding every value p
with (p mod 32) div 4 == l, each times its sub-block scale (maddubs + madd); then
acc[l] = fma(d, float(isum_l), acc[l]) with d = f32(x.d * half(w.d)). The min terms
(dmin = f32(-x.d * half(w.dmin))):
- Q2_K: before that, acc[l] = fma(dmin, float(m[2l] bsums[2l] + m[2l+1] bsums[2l+1]));
- Q4_K: a 4-lane acc_m[i] = fma(dmin, float(m[2i] s[2i] + m[2i+1] s[2i+1]), acc_m[i])
  with s[k] = bsums[2k] + bsums[2k+1]; result + ((m0 + m2) + (m1 + m3));
- Q5_K: a scalar summs = fma(dmin, float(sum_k m[k] s[k]), summs); result + summs;
- Q3_K (scale - 32, value - 4 when its hmask bit is clear): none;
- Q6_K: the values are taken unsigned (0..63) and lane l's integer sum loses
  32 * (sc[2l] bsums[2l] + sc[2l+1] bsums[2l+1]) (the -32 offset via bsums).
Result = hsum_float_8(acc) (+ the min term). The kernels read the GGUF bytes.

Q4_K weights with a row count divisible by 8 are repacked by llama.cpp on AVX2
(repack.cpp, q4_K_8x8_q8_K; ggml_gemv/gemm_q4_K_8x8_q8_K in arch/x86/repack.cpp): per
super-block (gemv) the exact totals i = sum sc q x and m = sum_j min_j (bsums[2j] +
bsums[2j+1]) go to acc = fma(float(i), f32(half(w.d) x.d), acc) and
accm = fma(float(m), f32(half(w.dmin) x.d), accm); result acc - accm. Activation rows
in whole groups of 4 go through the gemm instead, which does the same per 64 values
(two sub-blocks), and are quantized by ggml_quantize_mat_q8_K_4x8 (quantize_q8_k).

From 8 activation rows on, the other K-quant weights go through ggml-cpu/tiled
(tiled-kernel.cpp, AVX2): per super-block the exact totals s1 = sum sc q x (signed
values) and s2 = sum_k min_k bsums[k] give res = f32(half(w.d) * float(s1)), then
res = fma(-half(w.dmin), float(s2), res) for the types with mins, and
out = fma(res, x.d, out) over the super-blocks in order.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.math.ggml_math import fma32
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.ggml_dot import hsum8
from onnxexec.kernels.quant.kquants import scale_min_k4

QK_K: Final = 256
# ggml type -> (kind, bytes per super-block)
K_TYPES: Final = {
    q.Q2_K: (2, q.Q2_K_BYTES),
    q.Q3_K: (3, q.Q3_K_BYTES),
    q.Q4_K: (4, q.Q4_K_BYTES),
    q.Q5_K: (5, q.Q5_K_BYTES),
    q.Q6_K: (6, q.Q6_K_BYTES),
}
TILED_MIN_T: Final = 8  # ggml_tiled_min_batch: from 8 activation rows on, tiled takes over
REPACK_Q4_K: Final = 7  # kind of Q4_K weights with N % 8 == 0 (llama.cpp repacks those)


def _value_tables() -> np.ndarray:
    """(8, 6, 256) int32 per kind: value p = ((raw[o + a] >> sa) & ma) |
    (((raw[o + b] >> sb) & mb) << hb) - off; rows a, sa, b, sb, and per-kind masks."""
    p = np.arange(QK_K)
    tab = np.zeros((8, 4, QK_K), np.int32)
    h, r = p // 128, p % 128
    tab[2] = [16 + 32 * h + r % 32, 2 * (r // 32), 0 * p, 0 * p]
    tab[3] = [32 + 32 * h + r % 32, 2 * (r // 32), p % 32, p // 32]
    c, r64 = p // 64, p % 64
    for kind, qs_at in ((4, 16), (5, 48), (7, 16)):
        tab[kind] = [qs_at + 32 * c + r64 % 32, 4 * (r64 // 32), 16 + p % 32, p // 32]
    quarter, li = r // 32, r % 32
    tab[6] = [64 * h + li + 32 * (quarter & 1), 4 * (quarter // 2), 128 + 32 * h + li, 2 * quarter]
    return tab


VALUE_TAB: Final = _value_tables()
# per kind: (low mask, high mask, high shift, offset)
VALUE_BITS: Final = np.array(
    [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
        [3, 0, 0, 0],
        [3, 1, 2, 4],
        [15, 0, 0, 0],
        [15, 1, 4, 0],
        [15, 3, 4, 0],
        [15, 0, 0, 0],
    ],
    np.int32,
)


@nb.njit(cache=True, nogil=True, inline="always")
def _q8k_iscale(x, t, o, pos_ties):
    """-127 / (the value of largest magnitude) of super-block x[t, o:o + 256], or 0 for
    an all-zero block; with pos_ties, +amax wins over -amax (repack.cpp's 4x8 rows)."""
    amax = np.float32(0.0)
    mx = np.float32(0.0)
    for j in range(QK_K):
        ax = abs(x[t, o + j])
        if ax > amax:
            amax = ax
            mx = x[t, o + j]
    if amax == 0:
        return np.float32(0.0)
    if pos_ties:
        for j in range(QK_K):
            if x[t, o + j] == amax:
                mx = amax
                break
    return np.float32(np.float32(-127.0) / mx)


@nb.njit(cache=True, nogil=True)
def quantize_q8_k(x, rows4=0):
    """x (T, K) f32 -> qs (T, K) i32, d (T, K/256) f32, bsums (T, K/16) i32 (Q8_K).

    The first `rows4` rows follow ggml_quantize_mat_q8_K_4x8 (repack.cpp, AVX2), which
    differs only when both +amax and -amax occur: the positive one sets the sign."""
    t_rows, k = x.shape
    nsb = k // QK_K
    qs = np.zeros((t_rows, k), np.int32)
    d = np.zeros((t_rows, nsb), np.float32)
    bsums = np.zeros((t_rows, k // 16), np.int32)
    for t in range(t_rows):
        for i in range(nsb):
            o = i * QK_K
            iscale = _q8k_iscale(x, t, o, t < rows4)
            if iscale == 0:
                continue
            for j in range(QK_K):
                v = int(np.rint(np.float32(iscale * x[t, o + j])))
                qs[t, o + j] = min(127, v)
            for j in range(QK_K // 16):
                s = 0
                for jj in range(16):
                    s += qs[t, o + 16 * j + jj]
                bsums[t, i * 16 + j] = s
            d[t, i] = np.float32(np.float32(1.0) / iscale)
    return qs, d, bsums


@nb.njit(cache=True, nogil=True)
def quantize_q8_k8(x, rows4=0):
    """quantize_q8_k with the values as int8 (the width of ggml_simd_k's kernels): the
    same bits, in one pass per super-block and without the int32 copy."""
    t_rows, k = x.shape
    qs = np.empty((t_rows, k), np.int8)
    d = np.empty((t_rows, k // QK_K), np.float32)
    bsums = np.empty((t_rows, k // 16), np.int32)
    quantize_q8_k8_into(x, rows4, qs, d, bsums)
    return qs, d, bsums


@nb.njit(cache=True, nogil=True)
def quantize_q8_k8_into(x, rows4, qs, d, bsums):
    """quantize_q8_k8 into given arrays (a decode group's buffers: no allocation)."""
    t_rows, k = x.shape
    nsb = k // QK_K
    for t in range(t_rows):
        for i in range(nsb):
            o = i * QK_K
            iscale = _q8k_iscale(x, t, o, t < rows4)
            if iscale == 0:
                qs[t, o : o + QK_K] = 0
                bsums[t, i * 16 : i * 16 + 16] = 0
                d[t, i] = 0.0
                continue
            for j in range(QK_K // 16):
                s = 0
                for jj in range(16):
                    v = min(127, int(np.rint(np.float32(iscale * x[t, o + 16 * j + jj]))))
                    qs[t, o + 16 * j + jj] = v
                    s += v
                bsums[t, i * 16 + j] = s
            d[t, i] = np.float32(np.float32(1.0) / iscale)


@nb.njit(cache=True, nogil=True)
def _decode(raw, o, kind, tab, bits, qv, sc, mn):
    """Super-block at raw[o:] -> integer values qv[256] (Q6_K unsigned), scales sc[16]
    (per 16 values), mins mn[16]; returns (half d, half dmin)."""
    ma, mb, hb, off = bits[kind, 0], bits[kind, 1], bits[kind, 2], bits[kind, 3]
    for p in range(QK_K):
        lo = (np.int32(raw[o + tab[kind, 0, p]]) >> tab[kind, 1, p]) & ma
        hi = (np.int32(raw[o + tab[kind, 2, p]]) >> tab[kind, 3, p]) & mb
        qv[p] = (lo | (hi << hb)) - off
    if kind == 2:
        for k in range(16):
            b = np.int32(raw[o + k])
            sc[k] = b & 15
            mn[k] = b >> 4
        return f16_to_f32(raw[o + 80], raw[o + 81]), f16_to_f32(raw[o + 82], raw[o + 83])
    if kind == 3:
        for k in range(16):
            lo = np.int32(raw[o + 96 + k % 8])
            lo = (lo & 15) if k < 8 else (lo >> 4)
            hi = (np.int32(raw[o + 104 + k % 4]) >> (2 * (k // 4))) & 3
            sc[k] = (lo | (hi << 4)) - 32
            mn[k] = 0
        return f16_to_f32(raw[o + 108], raw[o + 109]), np.float32(0.0)
    if kind == 4 or kind == 5 or kind == 7:
        for j in range(8):
            s, m = scale_min_k4(raw, o + 4, j)
            sc[2 * j] = s
            sc[2 * j + 1] = s
            mn[2 * j] = m
            mn[2 * j + 1] = m
        return f16_to_f32(raw[o], raw[o + 1]), f16_to_f32(raw[o + 2], raw[o + 3])
    for k in range(16):
        v = np.int32(raw[o + 192 + k])
        sc[k] = v - 256 if v > 127 else v
        mn[k] = 0
    return f16_to_f32(raw[o + 208], raw[o + 209]), np.float32(0.0)


@nb.njit(parallel=True, cache=True, nogil=True)
def dot_k(raw, row_bytes, kind, bsize, tab, bits, xq, xd, bsums, rows4, tiled, out):
    """out (T, N) = W (N, K) . x, W's GGUF bytes raw (N * row_bytes), x as Q8_K
    (quantize_q8_k); kind / bsize from K_TYPES (or REPACK_Q4_K, whose first rows4
    activation rows take the gemm order); tiled: ggml-cpu/tiled's order. Rows in
    parallel."""
    t_rows, k = xq.shape
    n_rows = out.shape[1]
    nsb = k // QK_K
    n_chunks = min(n_rows, 256)
    for c in nb.prange(n_chunks):
        qv = np.empty(QK_K, np.int32)
        wv = np.empty(QK_K, np.int32)
        prod = np.empty(QK_K, np.int32)
        sc = np.empty(16, np.int32)
        mn = np.empty(16, np.int32)
        isum = np.empty(8, np.int32)
        acc = np.empty((t_rows, 8), np.float32)
        accm = np.empty((t_rows, 4), np.float32)
        for n in range(c * n_rows // n_chunks, (c + 1) * n_rows // n_chunks):
            acc[:] = 0.0
            accm[:] = 0.0
            for i in range(nsb):
                dw, dmw = _decode(raw, n * row_bytes + i * bsize, kind, tab, bits, qv, sc, mn)
                x0 = i * QK_K
                for p in range(QK_K):  # value x its sub-block scale (Q6_K: unsigned)
                    wv[p] = sc[p // 16] * qv[p]
                for t in range(t_rows):
                    yd = xd[t, i]
                    for p in range(QK_K):
                        prod[p] = wv[p] * xq[t, x0 + p]
                    d = np.float32(yd * dw)
                    dmin = np.float32(-yd * dmw)
                    if tiled:  # ggml-cpu/tiled: per super-block d * s1 - dmin * s2, then * x.d
                        s1 = 0
                        for p in range(QK_K):
                            s1 += prod[p]
                        if kind == 6:  # signed values: q - 32
                            for k16 in range(16):
                                s1 -= 32 * sc[k16] * bsums[t, 16 * i + k16]
                        res = np.float32(dw * np.float32(s1))
                        if kind == 2 or kind == 4 or kind == 5:
                            s2 = 0
                            for k16 in range(16):
                                s2 += mn[k16] * bsums[t, 16 * i + k16]
                            res = fma32(-dmw, np.float32(s2), res)
                        acc[t, 0] = fma32(res, yd, acc[t, 0])
                        continue
                    if kind == 2:
                        for lane in range(8):
                            pr = (
                                mn[2 * lane] * bsums[t, 16 * i + 2 * lane]
                                + mn[2 * lane + 1] * bsums[t, 16 * i + 2 * lane + 1]
                            )
                            acc[t, lane] = fma32(dmin, np.float32(pr), acc[t, lane])
                    elif kind == 4 or kind == 5:
                        tot = 0
                        for m in range(4):
                            s0 = bsums[t, 16 * i + 4 * m] + bsums[t, 16 * i + 4 * m + 1]
                            s1 = bsums[t, 16 * i + 4 * m + 2] + bsums[t, 16 * i + 4 * m + 3]
                            pr = mn[4 * m] * s0 + mn[4 * m + 2] * s1
                            tot += pr
                            if kind == 4:
                                accm[t, m] = fma32(dmin, np.float32(pr), accm[t, m])
                        if kind == 5:
                            accm[t, 0] = fma32(dmin, np.float32(tot), accm[t, 0])
                    if kind == 7:  # repacked Q4_K: gemm rows per 64 values, gemv per 256
                        step = 64 if t < rows4 else QK_K
                        dd = np.float32(dw * yd)
                        dm = np.float32(dmw * yd)
                        for p0 in range(0, QK_K, step):
                            tot = 0
                            for p in range(p0, p0 + step):
                                tot += prod[p]
                            tmin = 0
                            for j in range(p0 // 32, (p0 + step) // 32):
                                tmin += mn[2 * j] * (
                                    bsums[t, 16 * i + 2 * j] + bsums[t, 16 * i + 2 * j + 1]
                                )
                            acc[t, 0] = fma32(np.float32(tot), dd, acc[t, 0])
                            accm[t, 0] = fma32(np.float32(tmin), dm, accm[t, 0])
                        continue
                    for lane in range(8):
                        v = 0
                        for run in range(8):
                            o4 = 32 * run + 4 * lane
                            v += prod[o4] + prod[o4 + 1] + prod[o4 + 2] + prod[o4 + 3]
                        isum[lane] = v
                    if kind == 6:
                        for lane in range(8):
                            isum[lane] -= 32 * (
                                sc[2 * lane] * bsums[t, 16 * i + 2 * lane]
                                + sc[2 * lane + 1] * bsums[t, 16 * i + 2 * lane + 1]
                            )
                    for lane in range(8):
                        acc[t, lane] = fma32(d, np.float32(isum[lane]), acc[t, lane])
            for t in range(t_rows):
                if tiled:
                    out[t, n] = acc[t, 0]
                    continue
                if kind == 7:
                    out[t, n] = np.float32(acc[t, 0] - accm[t, 0])
                    continue
                h = hsum8(acc[t])
                if kind == 4:
                    mm = np.float32(
                        np.float32(accm[t, 0] + accm[t, 2]) + np.float32(accm[t, 1] + accm[t, 3])
                    )
                    h = np.float32(h + mm)
                elif kind == 5:
                    h = np.float32(h + accm[t, 0])
                out[t, n] = h


def ggml_dot_k(
    raw: np.ndarray, row_bytes: int, ggml_type: int, x: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """out (T, N) float32 = llama.cpp's products of K-quant weight rows (GGUF bytes)
    with x (T, K) float32 (quantized to Q8_K here)."""
    from onnxexec.kernels.quant.ggml_dot import simd_dot, simd_ok

    if simd_ok(ggml_type, out.shape[1]) and out.flags.c_contiguous:  # ggml_simd_k, same bits
        return simd_dot(raw, row_bytes, ggml_type, None, None, out, np.ascontiguousarray(x))
    kind, bsize = K_TYPES[int(ggml_type)]
    rows4 = 0
    if kind == 4 and out.shape[1] % 8 == 0:
        kind = REPACK_Q4_K
        rows4 = x.shape[0] - x.shape[0] % 4
    xq, xd, bsums = quantize_q8_k(x, rows4)
    tiled = kind != REPACK_Q4_K and x.shape[0] >= TILED_MIN_T
    dot_k(raw, row_bytes, kind, bsize, VALUE_TAB, VALUE_BITS, xq, xd, bsums, rows4, tiled, out)
    return out
