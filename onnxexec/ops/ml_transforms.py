"""ai.onnx.ml feature transforms: ArrayFeatureExtractor, Binarizer, FeatureVectorizer,
Imputer, Normalizer, Scaler.

Where the spec is loose about shapes (1-D inputs) these follow onnxruntime: a 1-D
input is one row of features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from onnxexec.ops.ml_common import memo
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"
# kernels.ml.ml_scores' NORM_MAX, NORM_L1, NORM_L2 (a test checks they agree). That module
# is numba, imported by the handlers that call it: a model whose ops are all numpy (a
# LinearRegressor) then never loads numba (~60 MB of what would be a ~47 MB process).
# Normalizer and Scaler stay compiled: one call per op. On numpy they took 4-6 calls,
# each 25-70 us when the caches are cold (bench_onnx's settled runs), which made
# logistic_regression 1.50x onnxruntime instead of 0.86x.
_NORMS: Final = {"MAX": 0, "L1": 1, "L2": 2}


@op("ArrayFeatureExtractor", since=1, domain=ML)
def array_feature_extractor(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Select indices `y` along X's last axis: (..., C) -> (..., len(y)); 1-D X -> (1, len(y))."""
    idx = np.asarray(y, dtype=np.int64).reshape(-1)
    c = x.shape[-1] if x.ndim else 0
    if idx.size and (idx.min() < 0 or idx.max() >= c):
        raise IndexError(f"ArrayFeatureExtractor: index out of range [0, {c}): {idx.tolist()}")
    out = np.take(x, idx, axis=-1)
    return out.reshape(1, -1) if x.ndim == 1 else out


@op("Binarizer", since=1, domain=ML)
def binarizer(x: np.ndarray, *, threshold: float = 0.0) -> np.ndarray:
    """1 where x > threshold, else 0, in X's dtype (NaN stays NaN)."""
    out = (x > np.asarray(threshold).astype(x.dtype)).astype(x.dtype)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        if nan.any():
            out[nan] = np.nan
    return out


@op("FeatureVectorizer", since=1, domain=ML)
def feature_vectorizer(*xs: np.ndarray, inputdimensions: Sequence[int] | None = None) -> np.ndarray:
    """Concatenate inputs' features into (N, sum(inputdimensions)) float32.

    Input i contributes inputdimensions[i] columns: its row is cut or zero-padded
    to that width. A 1-D input is a single row; rank > 2 is flattened per row.
    """
    dims = tuple(inputdimensions or ())
    if len(dims) != len(xs):
        raise ValueError(f"FeatureVectorizer: {len(xs)} inputs but {len(dims)} inputdimensions")
    if not xs:
        raise ValueError("FeatureVectorizer: needs at least one input")
    n = 1 if xs[0].ndim == 1 else xs[0].shape[0]
    out = np.zeros((n, sum(dims)), dtype=np.float32)
    col = 0
    for x, d in zip(xs, dims, strict=True):
        rows = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
        if rows.shape[0] != n:
            raise ValueError(f"FeatureVectorizer: inputs have {rows.shape[0]} and {n} rows")
        w = min(d, rows.shape[1])
        out[:, col : col + w] = rows[:, :w]
        col += d
    return out


@op("Imputer", since=1, domain=ML)
def imputer(
    x: np.ndarray,
    *,
    imputed_value_floats: Sequence[float] | None = None,
    imputed_value_int64s: Sequence[int] | None = None,
    replaced_value_float: float = 0.0,
    replaced_value_int64: int = 0,
) -> np.ndarray:
    """Replace replaced_value_* (NaN: every NaN) by the per-feature or single imputed value."""
    if x.dtype.kind == "f":
        values = np.asarray(imputed_value_floats or (), dtype=x.dtype)
        hit = (
            np.isnan(x)
            if np.isnan(replaced_value_float)
            else x == x.dtype.type(replaced_value_float)
        )
    else:
        values = np.asarray(imputed_value_int64s or (), dtype=x.dtype)
        hit = x == replaced_value_int64
    c = x.shape[-1] if x.ndim else 1
    if values.size not in (1, c):
        raise ValueError(f"Imputer: {values.size} imputed values for {c} features")
    return np.where(hit, values if values.size == c else values[0], x).astype(x.dtype)


@op("Normalizer", since=1, domain=ML)
def normalizer(x: np.ndarray, *, norm: str = "MAX") -> np.ndarray:
    """Row-wise MAX (divide by the row max), L1 or L2 normalisation -> float32.

    Rows whose norm is 0 are copied unchanged (onnxruntime).
    """
    if x.ndim > 2:
        raise ValueError(f"Normalizer: input rank must be <= 2, got shape {list(x.shape)}")
    kind = _NORMS.get(norm)
    if kind is None:
        raise ValueError(f"Normalizer: norm must be MAX, L1 or L2, got '{norm}'")
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    v = rows if rows.dtype == np.float32 else rows.astype(np.float32)
    from onnxexec.kernels.ml.ml_scores import normalize

    return normalize(v, kind).reshape(x.shape)


@op("Scaler", since=1, domain=ML)
def scaler(
    x: np.ndarray, *, offset: Sequence[float] | None = None, scale: Sequence[float] | None = None
) -> np.ndarray:
    """(x - offset) * scale -> float32; offset/scale are per feature or a single value."""
    v = x if x.dtype == np.float32 else x.astype(np.float32)
    c = v.shape[-1] if v.ndim else 1
    off, sc = memo(_scaler_params, offset, scale)
    for name, a in (("offset", off), ("scale", sc)):
        if a.size not in (1, c):
            raise ValueError(f"Scaler: {name} has {a.size} values for {c} features")
    from onnxexec.kernels.ml.ml_scores import scale_rows

    return scale_rows(v, off, sc)


def _scaler_params(
    offset: Sequence[float] | None, scale: Sequence[float] | None
) -> tuple[np.ndarray, np.ndarray]:
    off = np.asarray(offset if offset else (0.0,), dtype=np.float32)
    return off, np.asarray(scale if scale else (1.0,), dtype=np.float32)
