"""Random generators. With a `seed` attribute every call draws from a fresh
generator seeded with it, so a seeded node gives the same output on every run;
without one, a process-wide generator is used. Values are drawn in float64 and
cast to the requested ONNX dtype (float16/bfloat16/float/double)."""

from __future__ import annotations

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ops.registry import op

_GLOBAL = np.random.default_rng()


def set_global_seed(seed: int) -> None:
    """Reseed the generator nodes without a `seed` attribute draw from (ort.set_seed)."""
    global _GLOBAL
    _GLOBAL = np.random.default_rng(int(seed))


def _rng(seed: float | None) -> np.random.Generator:
    if seed is None:
        return _GLOBAL
    # The spec's seed is a float; its bit pattern keeps distinct seeds distinct.
    return np.random.default_rng(int(np.float64(seed).view(np.uint64)))


def _dtype(dtype: int | None, like: np.ndarray | None = None) -> np.dtype:
    if dtype is None:
        assert like is not None
        return like.dtype
    return np_dtype(dtype)


@op("RandomNormal", since=1)
def random_normal(
    *,
    shape: tuple[int, ...],
    dtype: int = 1,
    mean: float = 0.0,
    scale: float = 1.0,
    seed: float | None = None,
) -> np.ndarray:
    """N(mean, scale^2) samples of `shape`."""
    return _rng(seed).normal(mean, scale, shape).astype(np_dtype(dtype))


@op("RandomUniform", since=1)
def random_uniform(
    *,
    shape: tuple[int, ...],
    dtype: int = 1,
    high: float = 1.0,
    low: float = 0.0,
    seed: float | None = None,
) -> np.ndarray:
    """U[low, high) samples of `shape`."""
    return _rng(seed).uniform(low, high, shape).astype(np_dtype(dtype))


@op("RandomNormalLike", since=1)
def random_normal_like(
    x: np.ndarray,
    *,
    dtype: int | None = None,
    mean: float = 0.0,
    scale: float = 1.0,
    seed: float | None = None,
) -> np.ndarray:
    """Like RandomNormal with x's shape (and x's dtype unless `dtype` is given)."""
    return _rng(seed).normal(mean, scale, x.shape).astype(_dtype(dtype, x))


@op("RandomUniformLike", since=1)
def random_uniform_like(
    x: np.ndarray,
    *,
    dtype: int | None = None,
    high: float = 1.0,
    low: float = 0.0,
    seed: float | None = None,
) -> np.ndarray:
    """Like RandomUniform with x's shape (and x's dtype unless `dtype` is given)."""
    return _rng(seed).uniform(low, high, x.shape).astype(_dtype(dtype, x))


@op("Bernoulli", since=15)
def bernoulli(x: np.ndarray, *, dtype: int | None = None, seed: float | None = None) -> np.ndarray:
    """1 with probability x[i], else 0; x's dtype unless `dtype` is given."""
    u = _rng(seed).uniform(0.0, 1.0, x.shape)
    return (u < x.astype(np.float64)).astype(_dtype(dtype, x))


@op("Multinomial", since=7)
def multinomial(
    x: np.ndarray, *, dtype: int = 6, sample_size: int = 1, seed: float | None = None
) -> np.ndarray:
    """x (B, C) unnormalized log-probabilities -> (B, sample_size) class indices."""
    logits = x.astype(np.float64)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)  # (B, C)
    u = _rng(seed).uniform(0.0, 1.0, (x.shape[0], sample_size))
    idx = np.sum(u[:, :, None] >= cdf[:, None, :], axis=2)  # (B, S): first c with u < cdf
    return np.minimum(idx, x.shape[1] - 1).astype(np_dtype(dtype))
