"""Row-wise kernels of the ai.onnx.ml classifiers and transforms: score
post-transforms, linear scoring, Normalizer, Scaler (tree scores: tree_scores.py).

The models skl2onnx writes score a few dozen rows of a few columns: there every
numpy call costs more than its arithmetic, so each kernel here does one op's whole
row-wise job in one call. Arithmetic is float32 operation by operation, as the numpy
forms in ops/ml_common.py (the reference the unit tests compare against).

Transform codes (ops/ml_common.POST_TRANSFORMS order): NONE, LOGISTIC, SOFTMAX,
SOFTMAX_ZERO, PROBIT.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb

NONE: Final = 0
LOGISTIC: Final = 1
SOFTMAX: Final = 2
SOFTMAX_ZERO: Final = 3
PROBIT: Final = 4

_F0: Final = np.float32(0)
_F1: Final = np.float32(1)
_F2: Final = np.float32(2)
_HALF: Final = np.float32(0.5)
_ZERO_EPS: Final = np.float32(1e-7)
# Winitzki's erf^-1 constants, each rounded to float32 as ml_common.erf_inv does.
_W_TWO_OVER_PI_A: Final = np.float32(2) / (np.float32(np.pi) * np.float32(0.147))
_W_ONE_OVER_A: Final = np.float32(1) / np.float32(0.147)
_SQRT2: Final = np.float32(np.sqrt(2))


@nb.njit(cache=True)
def logistic32(t):
    """1 / (1 + exp(-t)) in float32, computed from |t| (ml_common.logistic)."""
    v = _F1 / (_F1 + np.exp(-np.abs(t)))
    return _F1 - v if t < 0 else v


@nb.njit(cache=True, error_model="numpy")
def probit32(p):
    """sqrt(2) * erf^-1(2p - 1) in float32 (ml_common.probit)."""
    x = _F2 * p - _F1
    sgn = np.float32(-1) if x < 0 else _F1
    w = (_F1 - x) * (_F1 + x)
    lg = np.log(w)
    v = _W_TWO_OVER_PI_A + _HALF * lg
    v2 = _W_ONE_OVER_A * lg
    return _SQRT2 * (sgn * np.sqrt(-v + np.sqrt(v * v - v2)))


@nb.njit(cache=True, error_model="numpy")
def transform_row(s, kind):
    """Apply post-transform `kind` in place to one row of C >= 2 float32 scores."""
    c = s.shape[0]
    if kind == LOGISTIC:
        for j in range(c):
            s[j] = logistic32(s[j])
    elif kind == PROBIT:
        for j in range(c):
            s[j] = probit32(s[j])
    elif kind == SOFTMAX:
        top = s[0]
        for j in range(1, c):
            if s[j] > top or np.isnan(s[j]):
                top = s[j]
        total = _F0
        for j in range(c):
            s[j] = np.exp(s[j] - top)
            total += s[j]
        for j in range(c):
            s[j] = s[j] / total
    elif kind == SOFTMAX_ZERO:
        # scores within 1e-7 of zero contribute ~0 instead of exp(0 - max)
        top = s[0]
        for j in range(1, c):
            if s[j] > top or np.isnan(s[j]):
                top = s[j]
        total = _F0
        for j in range(c):
            if np.abs(s[j]) > _ZERO_EPS:
                s[j] = np.exp(s[j] - top)
                total += s[j]
            else:
                s[j] = s[j] * np.exp(-top)
        for j in range(c):
            s[j] = s[j] / total


@nb.njit(cache=True)
def transform_rows(s, kind):
    """transform_row over every row of a (N, C) float32 matrix, in place."""
    for r in range(s.shape[0]):
        transform_row(s[r], kind)


@nb.njit(cache=True)
def argmax_row(s):
    """Index of the first largest value (NaN wins, as np.argmax)."""
    best = 0
    for j in range(1, s.shape[0]):
        if np.isnan(s[best]):
            break
        if s[j] > s[best] or np.isnan(s[j]):
            best = j
    return best


@nb.njit(cache=True)
def _linear_classify(x, w, b, kind, scores, best):
    """scores = transform(x @ w^T + b); best = argmax of the raw scores, per row.

    x (N, F) float32, w (C, F) float32, b (C,) float32 (zeros when absent).
    """
    n_feat = x.shape[1]
    for r in range(x.shape[0]):
        row = scores[r]
        for t in range(w.shape[0]):
            acc = _F0
            for f in range(n_feat):
                acc += x[r, f] * w[t, f]
            row[t] = acc + b[t]
        best[r] = argmax_row(row)
        transform_row(row, kind)


def linear_classify(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, kind: int
) -> tuple[np.ndarray, np.ndarray]:
    """(transformed scores (N, C) float32, argmax of the raw scores (N,) int64).

    x (N, F) float32, w (C, F) float32, b (C,) float32. With one column (C == 1)
    no transform is applied: the caller expands binary scores itself.
    """
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"input has {x.shape[1]} features, coefficients {w.shape[1]}")
    n = x.shape[0]
    scores = np.empty((n, w.shape[0]), np.float32)
    best = np.empty(n, np.int64)
    _linear_classify(
        x if x.flags.c_contiguous else np.ascontiguousarray(x),
        w,
        b,
        kind if w.shape[0] > 1 else NONE,
        scores,
        best,
    )
    return scores, best


# Normalizer norms.
NORM_MAX: Final = 0
NORM_L1: Final = 1
NORM_L2: Final = 2


@nb.njit(cache=True)
def _normalize(v, norm, out):
    """out[r] = v[r] / ||v[r]|| (MAX: the row max); rows whose norm is 0 are copied."""
    for r in range(v.shape[0]):
        row = v[r]
        if norm == NORM_MAX:
            d = row[0]
            for j in range(1, row.shape[0]):
                if row[j] > d or np.isnan(row[j]):
                    d = row[j]
        else:
            d = _F0
            for j in range(row.shape[0]):
                d += np.abs(row[j]) if norm == NORM_L1 else row[j] * row[j]
            if norm == NORM_L2:
                d = np.sqrt(d)
        if d != 0:
            for j in range(row.shape[0]):
                out[r, j] = row[j] / d
        else:
            for j in range(row.shape[0]):
                out[r, j] = row[j]


def normalize(v: np.ndarray, norm: int) -> np.ndarray:
    """Row-wise NORM_MAX / NORM_L1 / NORM_L2 normalisation of (N, C) float32 rows."""
    out = np.empty(v.shape, np.float32)
    if v.shape[1]:
        _normalize(v if v.flags.c_contiguous else np.ascontiguousarray(v), norm, out)
    return out


@nb.njit(cache=True)
def _scale(v, offset, scale, out):
    """out[r, j] = (v[r, j] - offset[j]) * scale[j]; a 1-element offset/scale applies to all."""
    c = v.shape[1]
    one_off = offset.shape[0] == 1
    one_sc = scale.shape[0] == 1
    for r in range(v.shape[0]):
        for j in range(c):
            o = offset[0] if one_off else offset[j]
            s = scale[0] if one_sc else scale[j]
            out[r, j] = (v[r, j] - o) * s


def scale_rows(v: np.ndarray, offset: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(x - offset) * scale over the last axis of a float32 array (Scaler), float32."""
    out = np.empty(v.shape, np.float32)
    c = v.shape[-1] if v.ndim else 1
    if v.size:
        v2 = v.reshape(-1, c)
        _scale(
            v2 if v2.flags.c_contiguous else np.ascontiguousarray(v2),
            offset,
            scale,
            out.reshape(-1, c),
        )
    return out
