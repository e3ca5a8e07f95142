"""Order-based ops: TopK, ArgMax, ArgMin.

Ties are resolved by position, as onnxruntime does and the spec asks: TopK returns the
lower index first, ArgMax/ArgMin the first (or, with select_last_index, the last) one.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.common import norm_axis
from onnxexec.ops.registry import op


def _topk(x: np.ndarray, k: int, axis: int, largest: int) -> tuple[np.ndarray, np.ndarray]:
    axis = norm_axis(axis, x.ndim, "TopK")
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"TopK: k={k} out of range [0, {n}] for axis {axis}")
    if largest:
        # Stable ascending sort of the reversed axis, read backwards: values descending,
        # equal values in ascending original index.
        rev = np.flip(x, axis=axis)
        order = np.argsort(rev, axis=axis, kind="stable")
        order = np.flip(order, axis=axis)
        idx = (n - 1) - np.take(order, np.arange(k), axis=axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
        idx = np.take(order, np.arange(k), axis=axis)
    idx = idx.astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx


def _k(k: np.ndarray) -> int:
    kk = np.asarray(k).reshape(-1)
    if kk.size != 1:
        raise ValueError(f"TopK: K must hold one value, has {kk.size}")
    return int(kk[0])


@op("TopK", since=11)
def top_k(
    x: np.ndarray,
    k: np.ndarray,
    *,
    axis: int = -1,
    largest: int = 1,
    sorted: int = 1,  # noqa: A002
) -> tuple[np.ndarray, np.ndarray]:
    """(values, int64 indices) of the k largest (or smallest) along axis, ties lower index first.

    With sorted=0 any order is allowed; we return the sorted order.
    """
    return _topk(x, _k(k), axis, largest)


@op("TopK", since=10)
def top_k_v10(x: np.ndarray, k: np.ndarray, *, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Opset 10: K as an input, always the largest, sorted."""
    return _topk(x, _k(k), axis, 1)


@op("TopK", since=1)
def top_k_v1(x: np.ndarray, *, k: int, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Opsets 1-9: k as an attribute."""
    return _topk(x, k, axis, 1)


def _arg(fn: str, data: np.ndarray, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    axis = norm_axis(axis, data.ndim, fn)
    if data.shape[axis] == 0:
        raise ValueError(f"{fn}: cannot reduce an empty axis {axis}")
    f = np.argmax if fn == "ArgMax" else np.argmin
    if select_last_index:
        n = data.shape[axis]
        out = (n - 1) - f(np.flip(data, axis=axis), axis=axis, keepdims=bool(keepdims))
    else:
        out = f(data, axis=axis, keepdims=bool(keepdims))
    return np.asarray(out, dtype=np.int64)


@op("ArgMax", since=12)
def arg_max(
    data: np.ndarray, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0
) -> np.ndarray:
    """int64 index of the maximum along axis (first one, or last with select_last_index)."""
    return _arg("ArgMax", data, axis, keepdims, select_last_index)


@op("ArgMax", since=1)
def arg_max_v1(data: np.ndarray, *, axis: int = 0, keepdims: int = 1) -> np.ndarray:
    """Opsets 1-11: first index of the maximum."""
    return _arg("ArgMax", data, axis, keepdims, 0)


@op("ArgMin", since=12)
def arg_min(
    data: np.ndarray, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0
) -> np.ndarray:
    """int64 index of the minimum along axis (first one, or last with select_last_index)."""
    return _arg("ArgMin", data, axis, keepdims, select_last_index)


@op("ArgMin", since=1)
def arg_min_v1(data: np.ndarray, *, axis: int = 0, keepdims: int = 1) -> np.ndarray:
    """Opsets 1-11: first index of the minimum."""
    return _arg("ArgMin", data, axis, keepdims, 0)
