"""Lanes kernels with llama.cpp's summation order for Q4_K and Q6_K weights.

The arithmetic is ggml_dot_k.dot_k's (see there for the llama.cpp sources): the
activations are Q8_K (ggml_dot_k.quantize_q8_k: per 256 values a float32 scale xd,
int8 values, int sums of each 16), and
- Q4_K (rows a multiple of 8: llama.cpp repacks them, q4_K_8x8_q8_K): per super-block
  and per 64 values (activation rows in whole groups of 4, the gemm) or 256 values
  (the rest, gemv) the exact totals tot = sum sc q x and tmin = sum min (bsums pairs)
  go to acc = fma(float(tot), f32(d x.d), acc), accm = fma(float(tmin),
  f32(dmin x.d), accm); result acc - accm.
- Q6_K, fewer than 8 activation rows (ggml_vec_dot_q6_K_q8_K): 8 int32 lanes, lane l
  summing sc * q * x over the values 4l..4l+3 of every 32 (q unsigned, 0..63), minus
  32 (sc bsums) of the 16-value groups 2l and 2l+1; acc[l] = fma(f32(d x.d),
  float(isum_l), acc[l]); result hsum_float_8(acc).
- Q6_K, 8 rows or more (ggml-cpu/tiled): per super-block res = f32(d float(s1)) with
  s1 = sum sc (q - 32) x, out = fma(res, x.d, out).
The weights are qlayout.py's lanes arrays (64 rows side by side: qmv_nib's for Q4_K,
qmv_q8's for Q6_K); integer sums of 4 or 16 products run in int16 lanes (at most
4 * 63 * 127 or 16 * 15 * 127), scaled sums in int32. FMAs are real ones (fastmath
"contract" on `a + b * c` only), as in llama.cpp.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.lanes import pick, twins
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_dot_k import TILED_MIN_T, quantize_q8_k
from onnxexec.kernels.quant.qgemm_exact_k import q4k_gemm, q6k_gemm
from onnxexec.kernels.quant.qtypes import QK

NB_SB: Final = 8  # 32-value blocks per 256-value super-block


def _qmv_q4k_exact(qs, qh, fsc, usc, kind, off, xq, xd, bsums, rows4, out, n_chunks):
    """out (T, N) = W . x for Q4_K lanes weights (qmv_nib's arrays; qh, kind, off
    unused), x as Q8_K: xq (T, K) int16, xd (T, K/256) f32, bsums (T, K/16) int32;
    activation rows t < rows4 take the 64-value (gemm) steps."""
    ng, n_blocks, _, G = qs.shape
    T = xq.shape[0]
    N = out.shape[1]
    nsb = n_blocks // NB_SB
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):
        s0 = np.empty(G, np.int16)
        s1 = np.empty(G, np.int16)
        tot = np.empty(G, np.int32)
        tmin = np.empty(G, np.int32)
        dd = np.empty(G, np.float32)
        dm = np.empty(G, np.float32)
        acc = np.empty(G, np.float32)
        accm = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                step = 2 if t < rows4 else NB_SB
                acc[:] = 0.0
                accm[:] = 0.0
                for i in range(nsb):
                    yd = xd[t, i]
                    for ln in range(G):
                        dd[ln] = np.float32(fsc[g, i, 0, ln] * yd)
                        dm[ln] = np.float32(fsc[g, i, 1, ln] * yd)
                    for k0 in range(0, NB_SB, step):
                        tot[:] = 0
                        tmin[:] = 0
                        for k in range(k0, k0 + step):
                            b = i * NB_SB + k
                            xo = b * QK
                            for ln in range(G):
                                s0[ln] = 0
                                s1[ln] = 0
                            for j in range(16):
                                xl = xq[t, xo + j]
                                xh = xq[t, xo + 16 + j]
                                for ln in range(G):
                                    v = np.int16(qs[g, b, j, ln])
                                    s0[ln] = np.int16(s0[ln] + np.int16(v & 15) * xl)
                                    s1[ln] = np.int16(s1[ln] + np.int16(v >> 4) * xh)
                            bs = bsums[t, 16 * i + 2 * k] + bsums[t, 16 * i + 2 * k + 1]
                            for ln in range(G):
                                isum = np.int32(s0[ln]) + np.int32(s1[ln])
                                tot[ln] += np.int32(usc[g, b, 0, ln]) * isum
                                tmin[ln] += np.int32(usc[g, b, 1, ln]) * bs
                        for ln in range(G):
                            acc[ln] = acc[ln] + np.float32(tot[ln]) * dd[ln]
                            accm[ln] = accm[ln] + np.float32(tmin[ln]) * dm[ln]
                for ln in range(nv):
                    out[t, n0 + ln] = np.float32(acc[ln] - accm[ln])


def _qmv_q6k_exact(ql, qh, sc, d, xq, xd, bsums, tiled, out, n_chunks):
    """out (T, N) = W . x for Q6_K lanes weights (qmv_q8's arrays), x as Q8_K (see
    _qmv_q4k_exact); tiled: ggml-cpu/tiled's order (8 activation rows or more)."""
    ng, n_blocks, _, G = ql.shape
    T = xq.shape[0]
    N = out.shape[1]
    nsb = n_blocks // NB_SB
    n_chunks = max(1, min(ng, n_chunks))
    for c in nb.prange(n_chunks):
        s4 = np.empty((8, G), np.int16)
        isum = np.empty((8, G), np.int32)
        acc = np.empty((8, G), np.float32)
        dv = np.empty(G, np.float32)
        res = np.empty(G, np.float32)
        for g in range(c * ng // n_chunks, (c + 1) * ng // n_chunks):
            n0 = g * G
            nv = min(G, N - n0)
            for t in range(T):
                acc[:] = 0.0
                for i in range(nsb):
                    isum[:] = 0
                    for k in range(NB_SB):
                        b = i * NB_SB + k
                        xo = b * QK
                        for lane in range(8):
                            _q6_lane_sums(ql, qh, g, b, lane, xq, t, xo, s4[lane])
                        for lane in range(8):
                            h = lane // 4
                            for ln in range(G):
                                isum[lane, ln] += np.int32(sc[g, b, h, ln]) * np.int32(s4[lane, ln])
                    for lane in range(8):  # the -32 offset through bsums
                        b = i * NB_SB + lane
                        bs0 = 32 * bsums[t, 16 * i + 2 * lane]
                        bs1 = 32 * bsums[t, 16 * i + 2 * lane + 1]
                        for ln in range(G):
                            isum[lane, ln] -= (
                                np.int32(sc[g, b, 0, ln]) * bs0 + np.int32(sc[g, b, 1, ln]) * bs1
                            )
                    yd = xd[t, i]
                    if tiled:
                        for ln in range(G):
                            s = np.int32(0)
                            for lane in range(8):
                                s += isum[lane, ln]
                            res[ln] = np.float32(d[g, i, ln] * np.float32(s))
                        for ln in range(G):
                            acc[0, ln] = acc[0, ln] + res[ln] * yd
                        continue
                    for ln in range(G):
                        dv[ln] = np.float32(yd * d[g, i, ln])
                    for lane in range(8):
                        for ln in range(G):
                            acc[lane, ln] = acc[lane, ln] + dv[ln] * np.float32(isum[lane, ln])
                for ln in range(nv):
                    if tiled:
                        out[t, n0 + ln] = acc[0, ln]
                        continue
                    a0 = np.float32(acc[4, ln] + acc[0, ln])
                    a1 = np.float32(acc[5, ln] + acc[1, ln])
                    a2 = np.float32(acc[6, ln] + acc[2, ln])
                    a3 = np.float32(acc[7, ln] + acc[3, ln])
                    out[t, n0 + ln] = np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))


@nb.njit(cache=True, nogil=True, inline="always")
def _q6_lane_sums(ql, qh, g, b, lane, xq, t, xo, s):
    """s[ln] = sum over the block's values 4 lane .. 4 lane + 3 of q (0..63) x."""
    G = ql.shape[3]
    v0 = 4 * lane
    half = v0 // 16  # low (0) or high (1) nibbles of ql bytes v % 16
    quart = v0 // 8  # qh bits 2 quart .. 2 quart + 1 of bytes v % 8
    x0 = xq[t, xo + v0]
    x1 = xq[t, xo + v0 + 1]
    x2 = xq[t, xo + v0 + 2]
    x3 = xq[t, xo + v0 + 3]
    lsh = np.int16(4 * half)
    hsh = np.int16(2 * quart)
    three = np.int16(3)
    fifteen = np.int16(15)
    four = np.int16(4)
    jl = v0 % 16
    jh = v0 % 8
    for ln in range(G):
        u0 = np.bitwise_and(np.right_shift(np.int16(ql[g, b, jl, ln]), lsh), fifteen) | (
            np.left_shift(
                np.bitwise_and(np.right_shift(np.int16(qh[g, b, jh, ln]), hsh), three), four
            )
        )
        u1 = np.bitwise_and(np.right_shift(np.int16(ql[g, b, jl + 1, ln]), lsh), fifteen) | (
            np.left_shift(
                np.bitwise_and(np.right_shift(np.int16(qh[g, b, jh + 1, ln]), hsh), three), four
            )
        )
        u2 = np.bitwise_and(np.right_shift(np.int16(ql[g, b, jl + 2, ln]), lsh), fifteen) | (
            np.left_shift(
                np.bitwise_and(np.right_shift(np.int16(qh[g, b, jh + 2, ln]), hsh), three), four
            )
        )
        u3 = np.bitwise_and(np.right_shift(np.int16(ql[g, b, jl + 3, ln]), lsh), fifteen) | (
            np.left_shift(
                np.bitwise_and(np.right_shift(np.int16(qh[g, b, jh + 3, ln]), hsh), three), four
            )
        )
        s[ln] = np.int16(
            np.int16(u0) * x0 + np.int16(u1) * x1 + np.int16(u2) * x2 + np.int16(u3) * x3
        )


QMV_Q4K_EXACT = twins(_qmv_q4k_exact, fastmath={"contract"})
QMV_Q6K_EXACT = twins(_qmv_q6k_exact, fastmath={"contract"})

K_EXACT_TYPES: Final = (q.Q4_K, q.Q6_K)
# activation rows from which the exact BLAS path (qgemm_exact_k) beats these kernels
# (2 threads, 3072 x 768: Q4_K lanes 17 ms vs BLAS 21 ms at 128 rows; Q6_K 13 vs 6 ms
# at 32 rows: its bit fields cost more to unpack in int16 lanes)
GEMM_MIN_T_Q4K: Final = tuning.QGEMM_MIN_T_Q4K
GEMM_MIN_T_Q6K: Final = tuning.QGEMM_MIN_T_Q6K


def lanes_ok(ggml_type: int, n_rows: int) -> bool:
    """True when a (n_rows, K) weight of this type takes these lanes kernels: Q6_K, and
    Q4_K with n_rows % 8 == 0 (llama.cpp computes other Q4_K weights un-repacked, in
    ggml_dot_k's vec_dot order, which stays on the GGUF bytes)."""
    return ggml_type == q.Q6_K or (ggml_type == q.Q4_K and n_rows % 8 == 0)


def qmatmul_k_exact(x: np.ndarray, args: tuple, ggml_type: int, out: np.ndarray) -> np.ndarray:
    """out (T, N) = x (T, K) f32 @ W^T in llama.cpp's order, W a Q4_K / Q6_K lanes
    weight given by its kernel arguments; x quantized to Q8_K here (as ggml_dot_k)."""
    t_rows = x.shape[0]
    n = out.shape[1]
    macs = t_rows * n * x.shape[1]
    if ggml_type == q.Q4_K:
        rows4 = t_rows - t_rows % 4
        xq, xd, bsums = quantize_q8_k(x, rows4)
        done = 0
        if rows4 >= GEMM_MIN_T_Q4K:  # the gemm rows on BLAS (qgemm_exact_k.py)
            q4k_gemm(args, xq, xd, bsums, rows4, out)
            done = rows4
        if done < t_rows:
            kern, n_chunks = pick(QMV_Q4K_EXACT, (t_rows - done) * n * x.shape[1])
            kern(
                *args,
                xq[done:].astype(np.int16),
                xd[done:],
                bsums[done:],
                rows4 - done,
                out[done:],
                n_chunks,
            )
    else:
        xq, xd, bsums = quantize_q8_k(x, 0)
        if t_rows >= max(GEMM_MIN_T_Q6K, TILED_MIN_T):
            q6k_gemm(args, xq, xd, out)
        else:
            kern, n_chunks = pick(QMV_Q6K_EXACT, macs)
            kern(*args, xq.astype(np.int16), xd, bsums, t_rows >= TILED_MIN_T, out, n_chunks)
    return out
