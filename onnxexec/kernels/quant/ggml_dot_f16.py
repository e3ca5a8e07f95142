"""F16 / BF16 / F32 weights x activations, summed in llama.cpp's order (x86 AVX2 + FMA).

llama.cpp first rounds the activations to the weight type's vec_dot_type (F16: half,
round to nearest even; BF16: bfloat16, round to nearest even; F32: unchanged), then:

- one activation row (or a weight whose rows / length tinyBLAS refuses): the vec_dot
  of ggml-cpu/vec.cpp. F16 and F32: 4 accumulators x 8 float32 lanes over steps of 32
  values, s[j][l] = fma(w, x, s[j][l]) for value 32i + 8j + l; reduced to
  v = (s0 + s2) + (s1 + s3), t_l = v[l] + v[l+4], r = (t0 + t1) + (t2 + t3)
  (GGML_F32x8_REDUCE); the K % 32 leftovers are added after, in double for F16
  (sumf += double(w * x)) and with float32 fma for F32. BF16 (ggml_vec_dot_bf16): the
  same accumulators (the compiler fuses its mul + add into an fma), reduced to
  v = (c0 + c2) + (c1 + c3), g_l = v[l+4] + v[l], r = (g0 + g2) + (g1 + g3), leftovers
  in double.
- several rows, K % 8 == 0 and N % 4 == 0: tinyBLAS<8> (llamafile/sgemm.cpp): one
  8-lane accumulator per output, acc[l] = fma(w, x, acc[l]) for values 8i + l, then
  hsum = (a0 + a2) + (a1 + a3) with a_l = acc[l+4] + acc[l].

Weights are read as stored: F16 / BF16 GGUF bytes through a 65536-entry float32 table,
F32 as a float32 (N, K) array.
"""

from __future__ import annotations

from typing import Final

import numba as nb
import numpy as np

from onnxexec.kernels.math.ggml_math import fma32
from onnxexec.kernels.quant import qtypes as q

_ALL = np.arange(1 << 16, dtype=np.uint32)
F16_TABLE: Final = _ALL.astype(np.uint16).view(np.float16).astype(np.float32)
BF16_TABLE: Final = (_ALL << 16).view(np.float32)
KIND = {q.F16: 0, q.BF16: 1, q.F32: 2}


def round_act(x: np.ndarray, kind: int) -> np.ndarray:
    """Activations as llama.cpp converts them to the vec_dot_type (float32 values)."""
    if kind == 0:
        with np.errstate(over="ignore"):  # beyond 65504: inf, as vcvtps2ph
            return x.astype(np.float16).astype(np.float32)
    if kind == 1:  # ggml_compute_fp32_to_bf16: nearest even; NaN kept quiet
        u = x.view(np.uint32)
        r = ((u + (np.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16) << 16
        nan = (u & 0x7FFFFFFF) > 0x7F800000
        r = np.where(nan, ((u >> 16) | 64) << 16, r).astype(np.uint32)
        return r.view(np.float32)
    return x


@nb.njit(cache=True, nogil=True, inline="always")
def _wval(wf, wh, table, kind, n, i):
    if kind == 2:
        return wf[n, i]
    return table[wh[n, i]]


@nb.njit(parallel=True, cache=True, nogil=True)
def dot_float(wf, wh, table, kind, tiny, x, out):
    """out (T, N) = W (N, K) . x (T, K) (x already rounded by round_act): W is wf
    (float32, kind 2) or wh (uint16 bit patterns through table, kinds 0 F16 / 1 BF16);
    tiny selects tinyBLAS's order, else vec_dot's (module docstring)."""
    t_rows, k = x.shape
    n_rows = out.shape[1]
    n_chunks = min(n_rows, 256)
    np_ = k - k % 32
    for c in nb.prange(n_chunks):
        s = np.empty(32, np.float32)
        for n in range(c * n_rows // n_chunks, (c + 1) * n_rows // n_chunks):
            for t in range(t_rows):
                s[:] = 0.0
                if tiny:
                    for i in range(0, k, 8):
                        for lane in range(8):
                            s[lane] = fma32(
                                _wval(wf, wh, table, kind, n, i + lane), x[t, i + lane], s[lane]
                            )
                    a0 = np.float32(s[4] + s[0])
                    a1 = np.float32(s[5] + s[1])
                    a2 = np.float32(s[6] + s[2])
                    a3 = np.float32(s[7] + s[3])
                    out[t, n] = np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))
                    continue
                for i in range(0, np_, 32):
                    for j in range(32):
                        s[j] = fma32(_wval(wf, wh, table, kind, n, i + j), x[t, i + j], s[j])
                v = np.empty(8, np.float32)
                for lane in range(8):
                    v[lane] = np.float32(
                        np.float32(s[lane] + s[16 + lane]) + np.float32(s[8 + lane] + s[24 + lane])
                    )
                g0 = np.float32(v[0] + v[4])
                g1 = np.float32(v[1] + v[5])
                g2 = np.float32(v[2] + v[6])
                g3 = np.float32(v[3] + v[7])
                if kind == 1:
                    r = np.float32(np.float32(g0 + g2) + np.float32(g1 + g3))
                else:
                    r = np.float32(np.float32(g0 + g1) + np.float32(g2 + g3))
                if kind == 2:
                    for i in range(np_, k):
                        r = fma32(wf[n, i], x[t, i], r)
                    out[t, n] = r
                else:
                    acc = np.float64(r)
                    for i in range(np_, k):
                        acc += np.float64(np.float32(table[wh[n, i]] * x[t, i]))
                    out[t, n] = np.float32(acc)


def ggml_dot_float(w: np.ndarray, ggml_type: int, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out (T, N) = llama.cpp's products of x (T, K) float32 with W (N, K): F16 / BF16
    as uint16 bit patterns, F32 as float32."""
    kind = KIND[int(ggml_type)]
    n, k = out.shape[1], x.shape[1]
    tiny = x.shape[0] >= 2 and k % 8 == 0 and n % 4 == 0
    xr = np.ascontiguousarray(round_act(x, kind))
    if kind == 2:
        wf, wh, table = w, np.zeros((1, 1), np.uint16), F16_TABLE
    else:
        wf, wh = np.zeros((1, 1), np.float32), w
        table = F16_TABLE if kind == 0 else BF16_TABLE
    dot_float(wf, wh, table, kind, tiny, xr, out)
    return out
