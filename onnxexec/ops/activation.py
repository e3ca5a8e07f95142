"""Activations: Relu, LeakyRelu, PRelu, Elu, Selu, Celu, ThresholdedRelu, Shrink,
Sigmoid, HardSigmoid, Tanh, Softplus, Softsign, HardSwish, Mish, Gelu, Swish, SwiGLU.

float16/bfloat16 are computed in float32 and rounded once at the end; results keep
the input dtype. Opset-1 versions carry the ignored `consumed_inputs` attribute.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from onnxexec.ops.elementwise import erf_array, legacy_broadcast, narrow
from onnxexec.ops.registry import op


def _f32(x: np.ndarray) -> np.ndarray:
    """Compute type: float16/bfloat16/float8 -> float32; float32/64 unchanged."""
    return x.astype(np.float32) if x.dtype.kind == "V" or x.dtype == np.float16 else x


def _act(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return narrow(fn(_f32(x)), x.dtype)


def stable_sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e**-x) without overflow for large |x|."""
    if x.dtype == np.float32 and x.ndim:  # (0-d: ufuncs give scalars, no `out=`)
        # In float64, rounded once: e**-x only overflows (to inf, giving 0) where the
        # true value is below float32's smallest subnormal, so no early underflow, and
        # four ufuncs on a tiny tensor cost half the stable form's nine.
        t = np.negative(x, dtype=np.float64)
        np.exp(t, out=t)
        t += 1.0
        np.reciprocal(t, out=t)
        return t.astype(np.float32)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + e**x), stable for large |x|."""
    return np.logaddexp(x.dtype.type(0), x)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


@op("Relu", since=1)
def relu_v1(x: np.ndarray, *, consumed_inputs: tuple[int, ...] = ()) -> np.ndarray:
    """max(0, x)."""
    return narrow(_relu(x), x.dtype)


@op("Relu", since=6)
def relu(x: np.ndarray) -> np.ndarray:
    """max(0, x); integer types from opset 14."""
    return narrow(_relu(x), x.dtype)


def _leaky(x: np.ndarray, alpha: float) -> np.ndarray:
    return _act(lambda v: np.where(v < 0, v * v.dtype.type(alpha), v), x)


@op("LeakyRelu", since=1)
def leaky_relu_v1(
    x: np.ndarray, *, alpha: float = 0.01, consumed_inputs: tuple[int, ...] = ()
) -> np.ndarray:
    """x for x >= 0, alpha * x otherwise."""
    return _leaky(x, alpha)


@op("LeakyRelu", since=6)
def leaky_relu(x: np.ndarray, *, alpha: float = 0.01) -> np.ndarray:
    """x for x >= 0, alpha * x otherwise."""
    return _leaky(x, alpha)


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return narrow(np.where(x < 0, x * slope, x), x.dtype)


@op("PRelu", since=1)
def prelu_v1(
    x: np.ndarray, slope: np.ndarray, *, consumed_inputs: tuple[int, ...] = ()
) -> np.ndarray:
    """PRelu-1: slope of size 1 is shared; otherwise it is per channel (axis 1)."""
    return prelu_v6(x, slope)


@op("PRelu", since=6)
def prelu_v6(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """PRelu-6: slope of size 1 is shared; a 1-D slope of size C applies per channel
    (axis 1, the Caffe2 layout these versions come from); else shapes must match."""
    if slope.size != 1 and slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1]:
        slope = slope.reshape((1, -1) + (1,) * (x.ndim - 2))
    elif slope.size == 1:
        slope = slope.reshape(())
    return _prelu(*legacy_broadcast(x, slope, 1, None, "PRelu"))


@op("PRelu", since=7)
def prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """x for x >= 0, slope * x otherwise; slope broadcasts onto x (numpy, one way)."""
    if np.broadcast_shapes(x.shape, slope.shape) != x.shape:
        raise ValueError(
            f"PRelu: slope {list(slope.shape)} does not broadcast to X {list(x.shape)}"
        )
    return _prelu(x, slope)


def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return _act(lambda v: np.where(v < 0, alpha * np.expm1(v), v), x)


@op("Elu", since=1)
def elu_v1(
    x: np.ndarray, *, alpha: float = 1.0, consumed_inputs: tuple[int, ...] = ()
) -> np.ndarray:
    """x for x >= 0, alpha * (e**x - 1) otherwise."""
    return _elu(x, alpha)


@op("Elu", since=6)
def elu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """x for x >= 0, alpha * (e**x - 1) otherwise."""
    return _elu(x, alpha)


def _selu(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    return _act(lambda v: gamma * np.where(v <= 0, alpha * np.expm1(v), v), x)


@op("Selu", since=1)
def selu_v1(
    x: np.ndarray,
    *,
    alpha: float = 1.6732,
    gamma: float = 1.0507,
    consumed_inputs: tuple[int, ...] = (),
) -> np.ndarray:
    """gamma * (x for x > 0, alpha * (e**x - 1) otherwise); opset-1 defaults."""
    return _selu(x, alpha, gamma)


@op("Selu", since=6)
def selu(
    x: np.ndarray,
    *,
    alpha: float = 1.67326319217681884765625,
    gamma: float = 1.05070102214813232421875,
) -> np.ndarray:
    """gamma * (x for x > 0, alpha * (e**x - 1) otherwise)."""
    return _selu(x, alpha, gamma)


@op("Celu", since=12)
def celu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """max(0, x) + min(0, alpha * (e**(x / alpha) - 1))."""
    return _act(lambda v: np.maximum(v, 0) + np.minimum(0, alpha * np.expm1(v / alpha)), x)


@op("ThresholdedRelu", since=10)
def thresholded_relu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """x where x > alpha, else 0."""
    return _act(lambda v: np.where(v > alpha, v, 0), x)


@op("Shrink", since=9)
def shrink(x: np.ndarray, *, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    """x + bias for x < -lambd, x - bias for x > lambd, else 0 (numeric types incl. ints)."""
    v = x.astype(np.float64) if x.dtype.kind in "iu" else _f32(x)
    with np.errstate(all="ignore"):
        y = np.where(v < -lambd, v + bias, np.where(v > lambd, v - bias, 0))
    return narrow(y, x.dtype)


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return _act(lambda v: np.clip(alpha * v + beta, 0, 1), x)


@op("HardSigmoid", since=1)
def hard_sigmoid_v1(
    x: np.ndarray, *, alpha: float = 0.2, beta: float = 0.5, consumed_inputs: tuple[int, ...] = ()
) -> np.ndarray:
    """max(0, min(1, alpha * x + beta))."""
    return _hard_sigmoid(x, alpha, beta)


@op("HardSigmoid", since=6)
def hard_sigmoid(x: np.ndarray, *, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    """max(0, min(1, alpha * x + beta))."""
    return _hard_sigmoid(x, alpha, beta)


@op("Sigmoid", since=1)
def sigmoid_v1(x: np.ndarray, *, consumed_inputs: tuple[int, ...] = ()) -> np.ndarray:
    """1 / (1 + e**-x)."""
    return _act(stable_sigmoid, x)


@op("Sigmoid", since=6)
def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e**-x)."""
    return _act(stable_sigmoid, x)


@op("Tanh", since=1)
def tanh_v1(x: np.ndarray, *, consumed_inputs: tuple[int, ...] = ()) -> np.ndarray:
    """tanh(x)."""
    return _act(np.tanh, x)


@op("Tanh", since=6)
def tanh(x: np.ndarray) -> np.ndarray:
    """tanh(x)."""
    return _act(np.tanh, x)


@op("Softplus", since=1)
def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + e**x)."""
    return _act(_softplus, x)


@op("Softsign", since=1)
def softsign(x: np.ndarray) -> np.ndarray:
    """x / (1 + |x|)."""
    return _act(lambda v: v / (1 + np.abs(v)), x)


@op("HardSwish", since=14)
def hard_swish(x: np.ndarray) -> np.ndarray:
    """x * max(0, min(1, x / 6 + 0.5)) (HardSigmoid with alpha=1/6, beta=0.5)."""
    return _act(lambda v: v * np.clip(v * v.dtype.type(1 / 6) + v.dtype.type(0.5), 0, 1), x)


@op("Mish", since=18)
def mish(x: np.ndarray) -> np.ndarray:
    """x * tanh(softplus(x))."""
    return _act(lambda v: v * np.tanh(_softplus(v)), x)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


@op("Gelu", since=20)
def gelu(x: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)); approximate='tanh':
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x**3)))."""
    if approximate == "none":
        return _act(lambda v: 0.5 * v * (1 + erf_array(v / np.sqrt(v.dtype.type(2)))), x)
    if approximate == "tanh":
        return _act(lambda v: 0.5 * v * (1 + np.tanh(_SQRT_2_OVER_PI * (v + 0.044715 * v**3))), x)
    raise ValueError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@op("Swish", since=24)
def swish(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """x * sigmoid(alpha * x)."""
    return _act(lambda v: v * stable_sigmoid(alpha * v), x)


@op("SwiGLU", since=28)
def swiglu(a: np.ndarray, b: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """Swish_alpha(A) * B for same-shape A (gate) and B (value); no broadcasting."""
    if a.shape != b.shape:
        raise ValueError(f"SwiGLU: A {list(a.shape)} and B {list(b.shape)} must have one shape")
    with np.errstate(all="ignore"):
        va = _f32(a)
        return narrow(va * stable_sigmoid(alpha * va) * _f32(b), a.dtype)
