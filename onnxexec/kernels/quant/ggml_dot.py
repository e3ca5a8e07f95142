"""Q4_1 / Q5_0 / Q5_1 / Q8_0 weights x int8 activations, summed in llama.cpp's order.

llama.cpp (x86, AVX2 + FMA build) multiplies these weights by activations quantized to
Q8_0 (Q5_0, Q8_0) or Q8_1 (Q4_1, Q5_1) blocks of 32 (actquant.quantize_act gives
both), in ggml_vec_dot_q*_q8_* (ggml-cpu/arch/x86/quants.c) for one activation row and
in tinyBLAS_Q0_AVX (llamafile/sgemm.cpp) for several, with the same arithmetic:

- per output value, 8 float32 lanes acc[l]; per block b, lane l gets the exact integer
  sum of the 4 products of the block's values 4l..4l+3 (maddubs + madd), and
  acc[l] = fma(d, float(isum_l), acc[l]) with d = f32(half(w.d) * half(x.d));
- Q4_1 / Q5_1 add the offsets separately: summs = fma(half(w.m), half(x.s), summs),
  one float32 scalar in block order;
- result = hsum_float_8(acc) + summs, hsum_float_8 = ((a0+a2)+(a1+a3)), a_i = acc[i] +
  acc[i+4].

Weight values in block order: value i is the low nibble of qs[i] for i < 16 and the
high nibble of qs[i-16] otherwise; Q5 types take bit i of the little-endian qh as the
fifth bit; Q5_0 subtracts 16, Q8_0 is int8. `dot_blocks` reads the GGUF bytes as they
are, one row per parallel iteration: it is the readable reference of this order (the
lanes kernels of qmv_exact.py compute the same bits faster).
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.math.ggml_math import fma32
from onnxexec.kernels.math.lanes import pick
from onnxexec.kernels.quant import ggml_simd, ggml_simd_k
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.fp16 import f16_to_f32
from onnxexec.kernels.quant.vnni_q4k import PACKED_Q4_K

# ggml type -> (kind for the kernel, bytes per block)
BLOCK_TYPES: Final = {
    q.Q4_1: (1, q.Q4_1_BYTES),
    q.Q5_0: (2, q.Q5_0_BYTES),
    q.Q5_1: (3, q.Q5_1_BYTES),
    q.Q8_0: (4, q.Q8_0_BYTES),
}


@nb.njit(cache=True, nogil=True, inline="always")
def _decode(raw, o, kind, w):
    """Block at raw[o:] -> its 32 integer values into w; returns (half d, half m or 0)."""
    d = f16_to_f32(raw[o], raw[o + 1])
    m = np.float32(0.0)
    if kind == 4:
        for i in range(32):
            v = np.int32(raw[o + 2 + i])
            w[i] = v - 256 if v > 127 else v
        return d, m
    if kind == 1 or kind == 3:
        m = f16_to_f32(raw[o + 2], raw[o + 3])
    qh_at = 2 if kind == 2 else 4
    qs_at = 4 if kind == 1 else qh_at + 4
    qh = np.int64(0)
    if kind != 1:
        qh = (
            np.int64(raw[o + qh_at])
            | (np.int64(raw[o + qh_at + 1]) << 8)
            | (np.int64(raw[o + qh_at + 2]) << 16)
            | (np.int64(raw[o + qh_at + 3]) << 24)
        )
    sub = 16 if kind == 2 else 0
    for i in range(16):
        b = np.int32(raw[o + qs_at + i])
        w[i] = (b & 15) | np.int32(((qh >> i) & 1) << 4) - sub
        w[i + 16] = (b >> 4) | np.int32(((qh >> (i + 16)) & 1) << 4) - sub
    return d, m


@nb.njit(cache=True, nogil=True, inline="always")
def hsum8(acc):
    """hsum_float_8: ((a0 + a2) + (a1 + a3)) with a_i = acc[i+4] + acc[i], in float32."""
    a0 = np.float32(acc[4] + acc[0])
    a1 = np.float32(acc[5] + acc[1])
    a2 = np.float32(acc[6] + acc[2])
    a3 = np.float32(acc[7] + acc[3])
    return np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))


@nb.njit(parallel=True, cache=True, nogil=True)
def dot_blocks(raw, row_bytes, kind, bsize, xq, xst, out):
    """out (T, N) = W (N, K) . x (T, K), W's GGUF bytes raw (N * row_bytes), activations
    quantize_act(x) = (xq, xst); kind / bsize from BLOCK_TYPES. Rows in parallel."""
    t_rows, k = xq.shape
    n_rows = out.shape[1]
    nb_ = k // 32
    for n in nb.prange(n_rows):
        w = np.empty(32, np.int32)
        acc = np.zeros((t_rows, 8), np.float32)
        summs = np.zeros(t_rows, np.float32)
        for b in range(nb_):
            dw, mw = _decode(raw, n * row_bytes + b * bsize, kind, w)
            x0 = b * 32
            for t in range(t_rows):
                d = np.float32(dw * xst[t, 0, b])
                for lane in range(8):
                    s = 0
                    for i in range(4 * lane, 4 * lane + 4):
                        s += w[i] * np.int32(xq[t, x0 + i])
                    acc[t, lane] = fma32(d, np.float32(s), acc[t, lane])
                if kind == 1 or kind == 3:
                    summs[t] = fma32(mw, xst[t, 1, b], summs[t])
        for t in range(t_rows):
            out[t, n] = np.float32(hsum8(acc[t]) + summs[t])


def ggml_dot(
    raw: np.ndarray,
    row_bytes: int,
    ggml_type: int,
    xq: np.ndarray,
    xst: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:
    """out (T, N) float32 = llama.cpp's dot products of the weight rows (GGUF bytes
    `raw`, `row_bytes` per row) with quantize_act's (xq, xst). Q4_1 and Q8_0 run
    ggml_simd's AVX2 kernels where the host has them (same bits)."""
    t = int(ggml_type)
    if t in SIMD_TYPES and t in ggml_simd.KINDS and out.flags.c_contiguous:
        x8 = np.ascontiguousarray(xq, dtype=np.int8)  # values fit: |q| <= 127
        simd_dot(raw, row_bytes, t, x8, np.ascontiguousarray(xst), out)
        return out
    kind, bsize = BLOCK_TYPES[t]
    dot_blocks(raw, row_bytes, kind, bsize, xq, xst, out)
    return out


SIMD_TYPES: Final = (
    frozenset(ggml_simd.KINDS) | frozenset(ggml_simd_k.KINDS)
    if ggml_simd.AVAILABLE
    else frozenset()
)


def simd_ok(ggml_type: int, n_rows: int) -> bool:
    """True when a (n_rows, K) weight of this type, as GGUF bytes, has an AVX2 kernel
    here (Q4_K: only with n_rows % 8 == 0, the weights llama.cpp repacks)."""
    t = int(ggml_type)
    return t in SIMD_TYPES and (t not in ggml_simd_k.KINDS or ggml_simd_k.simd_ok(t, n_rows))


def simd_dot(
    raw: np.ndarray,
    row_bytes: int,
    ggml_type: int,
    x8: np.ndarray | None,
    xst: np.ndarray | None,
    out: np.ndarray,
    h: np.ndarray | None = None,
) -> np.ndarray:
    """ggml_simd's kernel for a type in SIMD_TYPES: x8 (T, K) int8 and xst from
    actquant.quantize_act8 (block types), h (T, K) float32 the activations (K-quant
    types, quantized to Q8_K here); out (T, N) float32 C-contiguous."""
    return simd_dot_many([(raw, row_bytes, ggml_type)], x8, xst, out, h)


MULTI = True
"""Prompts (T >= ggml_simd.COLS rows) unpack each weight block once per COLS activation
rows (same bits as one row at a time, which False restores: kept for A/B timing)."""

_NO_X8 = np.zeros((1, 32), np.int8)
_NO_XST = np.zeros((1, 3, 1), np.float32)
NO_XK = (np.zeros((1, 256), np.int8), np.zeros((1, 1), np.float32), np.zeros((1, 16), np.int32))


def simd_dot_many(
    ws: list[tuple[np.ndarray, int, int]],
    x8: np.ndarray | None,
    xst: np.ndarray | None,
    out: np.ndarray,
    h: np.ndarray | None = None,
) -> np.ndarray:
    """out (T, sum N_i) = [W_1 . x | W_2 . x | ...] for weights (GGUF bytes, row bytes,
    ggml type; simd_ok) of one row length, in one call: the thread pool is woken once
    (when the products are large enough, lanes.pick). Block types read quantize_act8's
    (x8, xst), K-quant types the float activations h (T, K) (see simd_dot)."""
    from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k8

    raws = tuple(w[0] for w in ws)
    rbs = tuple(int(w[1]) for w in ws)
    types_ = [int(w[2]) for w in ws]
    kinds = tuple(ggml_simd_k.kind_of(t) for t in types_)
    col0s, c = [], 0
    for raw, rb in zip(raws, rbs, strict=True):
        col0s.append(c)
        c += raw.shape[0] // rb
    t_rows = out.shape[0]
    rows4 = t_rows - t_rows % 4
    xk4 = xk6 = NO_XK
    if q.Q4_K in types_ or PACKED_Q4_K in types_:  # the same activations for both
        xk4 = quantize_q8_k8(h, rows4)
    if q.Q6_K in types_:
        # the repacked Q4_K's gemm rows quantize differently (quantize_q8_k's rows4)
        xk6 = xk4 if rows4 == 0 and xk4 is not NO_XK else quantize_q8_k8(h, 0)
    if xk4 is not NO_XK and xk6 is not NO_XK and xk4 is not xk6:
        # both orders in one call would need two activation sets: one call per type
        for k6 in (False, True):
            part = [(i, w) for i, w in enumerate(ws) if (int(w[2]) == q.Q6_K) == k6]
            cols = [col0s[i] for i, _ in part]
            _call(
                tuple(w[0] for _, w in part),
                tuple(rbs[i] for i, _ in part),
                tuple(kinds[i] for i, _ in part),
                tuple(cols),
                x8,
                xst,
                xk6 if k6 else xk4,
                rows4,
                out,
            )
        return out
    _call(raws, rbs, kinds, tuple(col0s), x8, xst, xk6 if xk4 is NO_XK else xk4, rows4, out)
    return out


def _call(raws, rbs, kinds, col0s, x8, xst, xk, rows4, out) -> None:
    n_total = sum(r.shape[0] // rb for r, rb in zip(raws, rbs, strict=True))
    k = x8.shape[1] if x8 is not None else xk[0].shape[1]
    kern, n_chunks = pick(ggml_simd_k.DOT_MANY, out.shape[0] * n_total * k)
    kern(
        raws,
        rbs,
        kinds,
        col0s,
        _NO_X8 if x8 is None else x8,
        _NO_XST if xst is None else xst,
        *xk,
        rows4,
        out,
        n_chunks,
        ggml_simd.COLS if MULTI else 1,
    )
