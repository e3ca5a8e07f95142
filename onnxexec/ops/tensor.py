"""Tensor creation and structure: Constant, ConstantOfShape, Range, EyeLike, Trilu,
OneHot, NonZero, Unique."""

from __future__ import annotations

import math

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ops.common import ints, norm_axis
from onnxexec.ops.registry import op


@op("Constant", since=12)
def constant(
    *,
    value: np.ndarray | None = None,
    sparse_value: np.ndarray | None = None,
    value_float: float | None = None,
    value_floats: tuple[float, ...] | None = None,
    value_int: int | None = None,
    value_ints: tuple[int, ...] | None = None,
    value_string: str | None = None,
    value_strings: tuple[str, ...] | None = None,
) -> np.ndarray:
    """The one attribute that is set, as a tensor (floats -> float32, ints -> int64)."""
    given = [
        (k, v)
        for k, v in (
            ("value", value),
            ("sparse_value", sparse_value),
            ("value_float", value_float),
            ("value_floats", value_floats),
            ("value_int", value_int),
            ("value_ints", value_ints),
            ("value_string", value_string),
            ("value_strings", value_strings),
        )
        if v is not None
    ]
    if len(given) != 1:
        raise ValueError(
            f"Constant: exactly one value attribute expected, got {[k for k, _ in given]}"
        )
    kind, v = given[0]
    if kind in ("value", "sparse_value"):
        return np.asarray(v)
    if kind in ("value_float", "value_floats"):
        return np.array(v, dtype=np.float32)
    if kind in ("value_int", "value_ints"):
        return np.array(v, dtype=np.int64)
    if kind == "value_string":
        return np.array(v, dtype=object)
    out = np.empty(len(v), dtype=object)
    out[:] = list(v)
    return out


@op("Constant", since=11)
def constant_v11(
    *, value: np.ndarray | None = None, sparse_value: np.ndarray | None = None
) -> np.ndarray:
    """Opset 11: a dense or a sparse tensor attribute."""
    return constant(value=value, sparse_value=sparse_value)


@op("Constant", since=1)
def constant_v1(*, value: np.ndarray) -> np.ndarray:
    """Opsets 1-10: a tensor attribute."""
    return np.asarray(value)


@op("ConstantOfShape", since=9)
def constant_of_shape(input: np.ndarray, *, value: np.ndarray | None = None) -> np.ndarray:  # noqa: A002
    """Tensor of shape `input` filled with the one-element `value` (default float32 0)."""
    shape = ints(input)
    if any(d < 0 for d in shape):
        raise ValueError(f"ConstantOfShape: negative dim in {list(shape)}")
    if value is None:
        return np.zeros(shape, dtype=np.float32)
    v = np.asarray(value)
    if v.size != 1:
        raise ValueError(f"ConstantOfShape: value must hold one element, has {v.size}")
    return np.full(shape, v.reshape(-1)[0], dtype=v.dtype)


def _low_precision(dtype: np.dtype) -> bool:
    """float16 or bfloat16 (ml_dtypes' type, matched by name so it isn't imported)."""
    return dtype == np.float16 or (dtype.kind == "V" and dtype.name == "bfloat16")


def _range(
    start: np.ndarray, limit: np.ndarray, delta: np.ndarray, compute: np.dtype
) -> np.ndarray:
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.size != 1:
            raise ValueError(f"Range: {name} must be a scalar, got shape {list(v.shape)}")
    # Single-element tensors are accepted as scalars (AffineGrid's function body
    # feeds Split outputs of shape [1]); reduce them to 0-d before converting.
    start, limit, delta = start.reshape(()), limit.reshape(()), delta.reshape(())
    dtype = start.dtype
    if dtype.kind in "iu":
        s, lim, d = int(start), int(limit), int(delta)
        if d == 0:
            raise ValueError("Range: delta is 0")
        n = max(-((s - lim) // d), 0)  # ceil((lim - s) / d), exact in Python ints
        return (s + np.arange(n, dtype=np.int64) * d).astype(dtype)
    s, lim, d = (float(np.asarray(v).astype(compute)) for v in (start, limit, delta))
    if d == 0:
        raise ValueError("Range: delta is 0")
    n = max(math.ceil((lim - s) / d), 0)
    # output[i] = start + i * delta (Operators.md Range), not a running sum.
    vals = np.asarray(s, dtype=compute) + np.arange(n, dtype=compute) * np.asarray(d, compute)
    return vals.astype(dtype)


@op("Range", since=27)
def range_(
    start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *, stash_type: int = 1
) -> np.ndarray:
    """[start, start + delta, ...) up to limit exclusive; fp16/bf16 computed in stash_type."""
    dtype = np.asarray(start).dtype
    compute = np_dtype(stash_type) if _low_precision(dtype) else np.dtype(np.float64)
    return _range(np.asarray(start), np.asarray(limit), np.asarray(delta), compute)


@op("Range", since=11)
def range_v11(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Opsets 11-26."""
    dtype = np.asarray(start).dtype
    compute = dtype if _low_precision(dtype) else np.dtype(np.float64)
    return _range(np.asarray(start), np.asarray(limit), np.asarray(delta), compute)


@op("EyeLike", since=9)
def eye_like(input: np.ndarray, *, dtype: int | None = None, k: int = 0) -> np.ndarray:  # noqa: A002
    """2-D identity-like tensor with ones on diagonal k, shaped like input."""
    if input.ndim != 2:
        raise ValueError(f"EyeLike: input must be 2-D, got rank {input.ndim}")
    out_dtype = np_dtype(dtype) if dtype is not None else input.dtype
    return np.eye(input.shape[0], input.shape[1], k=k, dtype=out_dtype)


@op("Trilu", since=14)
def trilu(input: np.ndarray, k: np.ndarray | None = None, *, upper: int = 1) -> np.ndarray:  # noqa: A002
    """Keep the upper (or lower) triangle of the last two axes, from diagonal k."""
    kk = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    if input.ndim < 2:
        raise ValueError(f"Trilu: input rank {input.ndim} < 2")
    return np.triu(input, kk) if upper else np.tril(input, kk)


@op("OneHot", since=9)
def one_hot(
    indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *, axis: int = -1
) -> np.ndarray:
    """values[1] where index == position along a new `depth`-long axis, values[0] elsewhere.

    Negative indices count from depth; indices outside [-depth, depth-1] give all off.
    """
    d = int(np.asarray(depth).reshape(-1)[0])
    if d < 1:
        raise ValueError(f"OneHot: depth {d} < 1")
    vals = np.asarray(values).reshape(-1)
    if vals.size != 2:
        raise ValueError(f"OneHot: values must be [off, on], got {vals.size} elements")
    rank = indices.ndim
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"OneHot: axis {axis} out of range for rank {rank}")
    axis = axis + rank + 1 if axis < 0 else axis
    idx = (
        np.trunc(indices).astype(np.int64)
        if indices.dtype.kind == "f"
        else indices.astype(np.int64)
    )
    idx = np.where(idx < 0, idx + d, idx)
    hot = idx[..., None] == np.arange(d)
    out = np.where(hot, vals[1], vals[0]).astype(vals.dtype)
    return np.moveaxis(out, -1, axis)


@op("NonZero", since=9)
def non_zero(x: np.ndarray) -> np.ndarray:
    """(rank, n) int64 coordinates of non-zero elements, row-major order; a scalar acts as 1-D."""
    return np.array(np.nonzero(np.atleast_1d(x)), dtype=np.int64).reshape(max(x.ndim, 1), -1)


@op("Unique", since=11)
def unique(
    x: np.ndarray,
    *,
    axis: int | None = None,
    sorted: int = 1,  # noqa: A002 - spec attribute
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(Y, first-occurrence indices, inverse_indices, counts) of the unique values.

    Y is sorted ascending (sorted=1) or in order of first occurrence (sorted=0).
    With an axis, the unique items are the slices along it, compared lexicographically.
    """
    if axis is None:
        data, ax = x.reshape(-1), None
    else:
        ax = norm_axis(axis, x.ndim, "Unique")
        data = x
    y, first, inverse, counts = np.unique(
        data, return_index=True, return_inverse=True, return_counts=True, axis=ax
    )
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")  # first-occurrence order
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if ax is None else ax)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (
        y,
        first.astype(np.int64),
        inverse.astype(np.int64),
        counts.astype(np.int64),
    )
