"""In-place bias + activation epilogues for fused MatMul / Conv / Gelu (numba, nogil).

`epilogue(y, n0, n1, bias, code, alpha, beta)` works on the column range [n0, n1) of
a C-contiguous 2-D float32 array, so a thread can finish the slab of a matmul it
just computed while it is still in cache. Codes are the Activation kinds of
kernels/activation_kinds.py (ACT by name); alpha / beta are the activation's
attributes (LeakyRelu alpha, Clip min / max, HardSigmoid alpha / beta; Gelu / GeluTanh
alpha 1: x * (1 + erf) before the 0.5). The numpy reference is `epilogue_reference`.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.math.vmath import erf32, exp_row, tanh32

f32 = np.float32
_SQRT1_2: Final = 0.7071067811865476
_SQRT_2_OVER_PI: Final = 0.7978845608028654


@nb.njit(inline="always", cache=True)
def act_row(row, code, a, b, tmp, scratch):
    """Activation `code` in place over a 1-D float32 row (tmp / scratch as long)."""
    w = row.shape[0]
    if code == Activation.RELU:
        for j in range(w):
            row[j] = max(row[j], f32(0.0))
    elif code == Activation.GELU or code == Activation.GELU_TANH:
        # a != 0: the graph rounds x * (1 + erf) before halving it, which is inf for
        # x > float32 max / 2 (the usual export); else 0.5 * x first (Gelu-20's spec)
        first, second = (f32(1.0), f32(0.5)) if a != f32(0.0) else (f32(0.5), f32(1.0))
        for j in range(w):
            v = row[j]
            if code == Activation.GELU:
                p = f32(1.0) + erf32(v * f32(_SQRT1_2))
            else:
                p = f32(1.0) + tanh32(f32(_SQRT_2_OVER_PI) * (v + f32(0.044715) * v * v * v))
            row[j] = first * v * p * second
    elif code == Activation.SIGMOID or code == Activation.SILU:
        # sigmoid as ops/activation.py computes it: e / (1 + e), e = exp(x), for x < 0
        # (no underflow to 0 before exp(x) does); SiLU as the graph's x * Sigmoid(x)
        t = tmp[:w]
        for j in range(w):
            t[j] = -abs(row[j])
        exp_row(t, t, scratch)
        for j in range(w):
            v, e = row[j], t[j]
            s = f32(1.0) / (f32(1.0) + e) if v >= f32(0.0) else e / (f32(1.0) + e)
            row[j] = s if code == Activation.SIGMOID else v * s
    elif code == Activation.HARD_SWISH:
        for j in range(w):
            v = row[j]
            row[j] = v * min(max(v * f32(1.0 / 6.0) + f32(0.5), f32(0.0)), f32(1.0))
    elif code == Activation.CLIP:
        for j in range(w):
            row[j] = min(max(row[j], a), b)
    elif code == Activation.LEAKY_RELU:
        for j in range(w):
            v = row[j]
            row[j] = v if v >= f32(0.0) else v * a
    elif code == Activation.TANH:
        for j in range(w):
            row[j] = tanh32(row[j])
    elif code == Activation.HARD_SIGMOID:
        for j in range(w):
            row[j] = min(max(row[j] * a + b, f32(0.0)), f32(1.0))


@nb.njit(inline="always", cache=True)
def _piecewise(v, code, a, b):
    """The activations that are a compare or two of one value (PIECEWISE)."""
    if code == Activation.RELU:
        return max(v, f32(0.0))
    if code == Activation.CLIP:
        return min(max(v, a), b)
    if code == Activation.LEAKY_RELU:
        return v if v >= f32(0.0) else v * a
    return v


@nb.njit(nogil=True, cache=True, error_model="numpy")
def epilogue_jit(y, n0, n1, bias, has_bias, row_bias, z, has_z, code, alpha, beta):
    m = y.shape[0]
    w = n1 - n0
    scratch = np.empty(w, dtype=np.int32)
    tmp = np.empty(w, dtype=np.float32)
    a = f32(alpha)
    b = f32(beta)
    if (
        code == Activation.NONE
        or code == Activation.RELU
        or code == Activation.CLIP
        or code == Activation.LEAKY_RELU
    ):
        # one pass per row: the product's output is usually past L2 (a 96 x 12544
        # conv output is 4.8 MB), and each extra pass over it costs as much again
        for i in range(m):
            row = y[i, n0:n1]
            bv = bias[i] if has_bias and row_bias else f32(0.0)
            if has_bias and not row_bias:
                bb = bias[n0:n1]
                if has_z:
                    zr = z[i, n0:n1]
                    for j in range(w):
                        row[j] = _piecewise(row[j] + bb[j] + zr[j], code, a, b)
                else:
                    for j in range(w):
                        row[j] = _piecewise(row[j] + bb[j], code, a, b)
            elif has_z:
                zr = z[i, n0:n1]
                for j in range(w):
                    row[j] = _piecewise(row[j] + bv + zr[j], code, a, b)
            else:
                for j in range(w):
                    row[j] = _piecewise(row[j] + bv, code, a, b)
        return
    for i in range(m):
        row = y[i, n0:n1]
        if has_bias and row_bias:
            bv = bias[i]
            for j in range(w):
                row[j] += bv
        elif has_bias:
            bb = bias[n0:n1]
            for j in range(w):
                row[j] += bb[j]
        if has_z:
            zr = z[i, n0:n1]
            for j in range(w):
                row[j] += zr[j]
        act_row(row, code, a, b, tmp, scratch)


_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1), dtype=np.float32)


def epilogue(
    y: np.ndarray,
    n0: int,
    n1: int,
    bias: np.ndarray | None,
    code: int,
    alpha: float = 0.0,
    beta: float = 0.0,
    row_bias: bool = False,
    z: np.ndarray | None = None,
) -> None:
    """In place on y[:, n0:n1] (C-contiguous float32 2-D): += bias[n0:n1] (or, row_bias,
    bias[i] on row i), then the activation."""
    if bias is None and code == Activation.NONE and z is None:
        return
    if y.dtype != np.float32 or not y.flags.c_contiguous or y.ndim != 2:
        raise ValueError(
            f"epilogue: C-contiguous float32 matrix expected, got {y.dtype}{list(y.shape)}"
        )
    b = _NO_BIAS if bias is None else bias
    zz = _NO_Z if z is None else z
    # int(code): an Activation member is typed by numba as an enum, which has no
    # numba-free call key, so a stored overload could never serve it (kernels/objload)
    epilogue_jit(
        y, n0, n1, b, bias is not None, row_bias, zz, z is not None, int(code), alpha, beta
    )


def epilogue_reference(
    y: np.ndarray, bias: np.ndarray | None, code: int, alpha: float = 0.0, beta: float = 0.0
) -> np.ndarray:
    """numpy/float64 reference of the whole-matrix epilogue (returns a new array)."""
    v = y.astype(np.float64) + (0.0 if bias is None else bias.astype(np.float64))
    erf = np.vectorize(math.erf, otypes=[np.float64])  # otypes: works on empty arrays
    K = Activation
    out = {
        K.NONE: lambda: v,
        K.RELU: lambda: np.maximum(v, 0.0),
        K.GELU: lambda: 0.5 * v * (1.0 + erf(v * _SQRT1_2)),
        K.GELU_TANH: lambda: 0.5 * v * (1.0 + np.tanh(_SQRT_2_OVER_PI * (v + 0.044715 * v**3))),
        K.SIGMOID: lambda: 1.0 / (1.0 + np.exp(-v)),
        K.SILU: lambda: v / (1.0 + np.exp(-v)),
        K.HARD_SWISH: lambda: v * np.clip(v / 6.0 + 0.5, 0.0, 1.0),
        K.CLIP: lambda: np.clip(v, alpha, beta),
        K.LEAKY_RELU: lambda: np.where(v >= 0, v, v * alpha),
        K.TANH: lambda: np.tanh(v),
        K.HARD_SIGMOID: lambda: np.clip(v * alpha + beta, 0.0, 1.0),
    }[Activation(code)]()
    if code in (K.GELU, K.GELU_TANH) and alpha:  # x * (1 + erf) rounded to float32 first (act_row)
        wide = np.abs(out) > np.finfo(np.float32).max / 2
        out = np.where(wide, np.copysign(np.inf, out), out)
    return out.astype(y.dtype)
