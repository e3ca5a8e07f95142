"""Serial kernels that glue the quantized matmuls of a decoder layer together.

Each one replaces a chain of small ops (and their numpy temporaries, thread-pool
wake-ups and executor steps) with one call, computing bit for bit what the chain
computes - the same float32 operations in the same order:
- `norm_quant`: RMSNorm (ops/llm.py rms_norm: squares in f32 summed in f64 in index
  order, mean and 1/sqrt in f32, (x * scale) * w), then the int8 activation blocks of
  actquant.quantize_act.
- `swiglu_quant`: ggml's SwiGLU (ggml_math.silu_mul) on a fused gate|up product, then
  quantize_act.
- `rope_store_one` + `ATTEND_ONE` (kernels/attn/attend_one.py, re-exported here): one new
  token's RoPE, KV-cache write and attention, as llama.cpp computes them.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.attn.attend_one import (  # noqa: F401  (re-exported: ops/llm_fused)
    ATTEND_ONE,
    attend_kernel,
    attend_token,
    reduce32,
    rope_store_one,
)
from onnxexec.kernels.math.ggml_math import (
    LN2_HI,
    LN2_LO,
    LOG2E,
    P0,
    P1,
    P2,
    P3,
    P4,
    ROUND_MAGIC,
    expf,
    fma32,
)
from onnxexec.kernels.quant.actquant import quantize_act, quantize_act8, quantize_act_into
from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k8_into

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
        z = fma32(xi, LOG2E, ROUND_MAGIC)
        n = np.float32(z - ROUND_MAGIC)
        b = fma32(-n, LN2_LO, fma32(-n, LN2_HI, xi))
        u = np.float32(b * b)
        j = fma32(fma32(fma32(P0, b, P1), u, fma32(P2, b, P3)), u, np.float32(P4 * b))
        ok = abs(n) <= np.float32(126.0)
        e = np.int32(n) if ok else np.int32(0)
        k = np.uint32(np.uint32(e + 127) << np.uint32(23)).view(np.float32)
        out[i] = fma32(j, k, k)
        special |= 0 if ok else 1
    if special:
        for i in range(x.shape[0]):
            if (
                not abs(np.float32(np.float32(fma32(x[i], LOG2E, ROUND_MAGIC)) - ROUND_MAGIC))
                <= 126.0
            ):
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
    into (xk8, xkd, xkbs) when `kq`."""
    if block:
        quantize_act_into(x, x8, xst)
    if kq:
        quantize_q8_k8_into(x, 0, xk8, xkd, xkbs)


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
