"""Shared pieces of the ai.onnx.ml classifiers and regressors (no handlers here).

Score post-transforms follow onnxruntime's ml_common.h, which the ONNX-ML spec
leaves loosely defined: LOGISTIC is the numerically stable sigmoid, SOFTMAX_ZERO
leaves zero scores out of the exponentials, PROBIT uses the Winitzki erf^-1
approximation (a = 0.147) that both onnxruntime and onnx's reference use, and a
single binary score is expanded into two columns by `expand_binary`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

POST_TRANSFORMS: Final = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")

# How a lone binary score becomes two columns (onnxruntime's `add_second_class`):
# -1 leave it alone, 0/1 (all weights positive) -> [1 - p, p] with p = s, or
# p = logistic(s) under LOGISTIC,
# 2/3 (mixed-sign weights) -> [-s, s], or [logistic(-s), logistic(s)] under LOGISTIC.
SECOND_CLASS_NONE: Final = -1

_MEMO_SIZE: Final = 256
_memo: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}


def memo(build: Callable[..., Any], *attrs: Any) -> Any:
    """build(*attrs), memoised on the identity of every attribute object.

    The plan binds the same attribute objects to every run of a node, so handlers
    use this to turn their (tuple) attributes into arrays once instead of per run.
    An entry holds its attribute objects, so while it exists no other object can
    have their ids: the id key alone identifies them. Pass attribute objects only: a
    value made per call is a new object every time, never hits and churns the cache.
    """
    key = (id(build), *map(id, attrs))
    hit = _memo.get(key)
    if hit is not None:
        return hit[1]
    value = build(*attrs)
    if len(_memo) >= _MEMO_SIZE:
        _memo.pop(next(iter(_memo)))
    _memo[key] = (attrs, value)
    return value


def logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) computed from |x| so large inputs never overflow."""
    v = 1 / (1 + np.exp(-np.abs(x)))
    return np.where(x < 0, 1 - v, v).astype(x.dtype, copy=False)


def softmax(s: np.ndarray) -> np.ndarray:
    """Row-wise softmax of a (N, C) score matrix."""
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_zero(s: np.ndarray) -> np.ndarray:
    """Row-wise softmax that maps scores within 1e-7 of zero to ~0 instead of exp(0)."""
    v_max = s.max(axis=1, keepdims=True)
    nonzero = np.abs(s) > 1e-7
    e = np.where(nonzero, np.exp(s - v_max), s * np.exp(-v_max))
    total = np.where(nonzero, e, 0).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return e / total


def erf_inv(x: np.ndarray) -> np.ndarray:
    """Winitzki's closed-form erf^-1 approximation in float32, as onnxruntime's ErfInv.

    Near x = 0 the formula cancels catastrophically, so the float32 operation
    order matters for parity; every constant is rounded to float32 first.
    """
    f = np.float32
    x = np.asarray(x, dtype=np.float32)
    sgn = np.where(x < 0, f(-1), f(1))
    w = (f(1) - x) * (f(1) + x)
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.log(w)
        v = f(2) / (f(np.pi) * f(0.147)) + f(0.5) * log
        v2 = f(1) / f(0.147) * log
        return sgn * np.sqrt(-v + np.sqrt(v * v - v2))


def probit(x: np.ndarray) -> np.ndarray:
    """sqrt(2) * erf^-1(2x - 1), the inverse normal CDF, computed in float32."""
    f = np.float32
    p = f(np.sqrt(2)) * erf_inv(f(2) * np.asarray(x, dtype=np.float32) - f(1))
    return p.astype(x.dtype, copy=False)


_TRANSFORMS: Final[dict[str, Callable[[np.ndarray], np.ndarray]]] = {
    "NONE": lambda s: s,
    "LOGISTIC": logistic,
    "SOFTMAX": softmax,
    "SOFTMAX_ZERO": softmax_zero,
    "PROBIT": probit,
}


def check_post_transform(name: str, op: str) -> None:
    if name not in _TRANSFORMS:
        raise ValueError(f"{op}: post_transform must be one of {POST_TRANSFORMS}, got '{name}'")


def transform_scores(scores: np.ndarray, post_transform: str) -> np.ndarray:
    """Apply `post_transform` to a (N, C) matrix of C >= 2 scores per row (a new array
    unless NONE). float32 scores go through the compiled kernels.ml.ml_scores version."""
    if post_transform == "NONE":
        return scores
    if scores.dtype == np.float32 and scores.ndim == 2:
        from onnxexec.kernels.ml.ml_scores import transform_rows

        out = np.array(scores, order="C")
        transform_rows(out, POST_TRANSFORMS.index(post_transform))
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        return _TRANSFORMS[post_transform](scores).astype(scores.dtype, copy=False)


def expand_binary(
    score: np.ndarray, post_transform: str, second_class: np.ndarray | int
) -> np.ndarray:
    """(N,) lone binary scores -> (N, 2) rows, per onnxruntime's write_scores.

    PROBIT transforms the score in column 0 and leaves column 1 at zero; otherwise
    `second_class` (per row or scalar, see SECOND_CLASS_NONE) picks the expansion.
    """
    n = score.shape[0]
    out = np.zeros((n, 2), dtype=score.dtype)
    if post_transform == "PROBIT":
        out[:, 0] = probit(score)
        return out
    if isinstance(second_class, int):
        return _expand_uniform(score, post_transform, second_class, out)
    mode = np.broadcast_to(np.asarray(second_class), (n,))
    one_minus = (mode == 0) | (mode == 1)
    mixed = (mode == 2) | (mode == 3)
    out[:, 0] = np.where(mode == SECOND_CLASS_NONE, score, out[:, 0])
    p = logistic(score) if post_transform == "LOGISTIC" else score
    out[:, 0] = np.where(one_minus, 1 - p, out[:, 0])
    out[:, 1] = np.where(one_minus, p, out[:, 1])
    if post_transform == "LOGISTIC":
        out[:, 0] = np.where(mixed, logistic(-score), out[:, 0])
        out[:, 1] = np.where(mixed, logistic(score), out[:, 1])
    else:
        out[:, 0] = np.where(mixed, -score, out[:, 0])
        out[:, 1] = np.where(mixed, score, out[:, 1])
    return out


def _expand_uniform(
    score: np.ndarray, post_transform: str, mode: int, out: np.ndarray
) -> np.ndarray:
    """expand_binary with one second-class mode for every row (fewer array passes)."""
    logistic_post = post_transform == "LOGISTIC"
    if mode == SECOND_CLASS_NONE:
        out[:, 0] = score
    elif mode in (0, 1):
        p = logistic(score) if logistic_post else score
        out[:, 1] = p
        out[:, 0] = 1 - p
    elif mode in (2, 3):
        out[:, 0] = logistic(-score) if logistic_post else -score
        out[:, 1] = logistic(score) if logistic_post else score
    return out


def class_labels(ints: Sequence[int] | None, strings: Sequence[str] | None, op: str) -> np.ndarray:
    """The classlabels_* attribute in use as an int64 or object (string) array."""
    if strings:
        return np.array(list(strings), dtype=object)
    if ints:
        return np.asarray(ints, dtype=np.int64)
    raise ValueError(f"{op}: one of classlabels_strings / classlabels_int64s is required")


def as_rows(x: np.ndarray, op: str) -> np.ndarray:
    """(C,) -> (1, C); (N, C) unchanged. The ML ops take one row per sample."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim != 2:
        raise ValueError(f"{op}: expected a 1-D or 2-D input, got shape {list(x.shape)}")
    return x


def floats_or_tensor(
    plain: Sequence[float] | None, tensor: np.ndarray | None, dtype: Any = np.float32
) -> np.ndarray | None:
    """An attribute given either as FLOATS or as its *_as_tensor variant."""
    if tensor is not None:
        return np.asarray(tensor).reshape(-1)
    if plain is not None:
        return np.asarray(plain, dtype=dtype)
    return None
