"""Gather / Scatter family: Gather, GatherElements, GatherND, Scatter, ScatterElements,
ScatterND, TensorScatter.

Negative indices count from the end of their axis; anything outside [-n, n-1] raises
an IndexError naming the op (never wraps silently).
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.common import norm_axis
from onnxexec.ops.registry import op


def _checked(indices: np.ndarray, n: int, op_name: str, what: str = "") -> np.ndarray:
    """int64 copy of `indices` mapped into [0, n); IndexError if any is outside [-n, n-1]."""
    idx = np.asarray(indices).astype(np.int64, copy=True)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            where = f" for {what}" if what else ""
            raise IndexError(f"{op_name}: index {bad} out of range [-{n}, {n - 1}]{where}")
        idx[idx < 0] += n
    return idx


_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


@op("Gather", since=1)
def gather(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """out = data indexed by `indices` on `axis`; shape data[:axis] + indices + data[axis+1:]."""
    ax = axis + data.ndim if axis < 0 else axis
    if type(indices) is np.ndarray and indices.dtype in _INDEX_DTYPES and 0 <= ax < data.ndim:
        if indices.ndim == 0 and ax == 0:  # x[i] (token or shape-dim lookup): a row copy
            i, n = int(indices), data.shape[0]
            if -n <= i < n:
                return data[i, ...].copy()  # `...` keeps a 0-d array, never a scalar
        # Fast path: np.take's default mode="raise" accepts exactly [-n, n-1] (negatives
        # count from the end, as the spec says) and raises IndexError otherwise; on any
        # error fall through so the message below names the op and the bad index.
        try:
            out = np.take(data, indices, axis=ax)
        except IndexError:
            pass
        else:
            # 0-d indices into 1-D data give a numpy (or Python, for strings) scalar.
            return out if type(out) is np.ndarray else np.array(out, dtype=data.dtype)
    axis = norm_axis(axis, data.ndim, "Gather")
    idx = _checked(indices, data.shape[axis], "Gather", f"axis {axis}")
    return np.take(data, idx, axis=axis)


@op("GatherElements", since=11)
def gather_elements(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """out[i][j][k] = data[indices[i][j][k]][j][k] (axis 0); out has the shape of indices."""
    axis = norm_axis(axis, data.ndim, "GatherElements")
    if indices.ndim != data.ndim:
        raise ValueError(f"GatherElements: indices rank {indices.ndim} != data rank {data.ndim}")
    idx = _checked(indices, data.shape[axis], "GatherElements", f"axis {axis}")
    return np.take_along_axis(data, idx, axis=axis)


def _gather_nd(data: np.ndarray, indices: np.ndarray, batch_dims: int) -> np.ndarray:
    b = batch_dims
    if indices.ndim < 1:
        raise ValueError("GatherND: indices must have rank >= 1")
    k = indices.shape[-1]
    if b + k > data.ndim or data.shape[:b] != indices.shape[:b]:
        raise ValueError(
            f"GatherND: data {list(data.shape)} and indices {list(indices.shape)} "
            f"do not match for batch_dims={b}"
        )
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    d = data.reshape(batch, *data.shape[b:])  # (Bflat, d_b, ..., d_n)
    idx = np.asarray(indices).astype(np.int64).reshape(batch, -1, k)  # (Bflat, M, k)
    coords = tuple(
        _checked(idx[..., j], data.shape[b + j], "GatherND", f"dim {b + j}") for j in range(k)
    )
    out = d[(np.arange(batch)[:, None], *coords)]  # (Bflat, M, *data.shape[b+k:])
    return out.reshape(*indices.shape[:-1], *data.shape[b + k :])


@op("GatherND", since=12)
def gather_nd(data: np.ndarray, indices: np.ndarray, *, batch_dims: int = 0) -> np.ndarray:
    """Gather slices of data addressed by the last axis of indices, after batch_dims batch axes."""
    return _gather_nd(data, indices, batch_dims)


@op("GatherND", since=11)
def gather_nd_v11(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Opset 11: no batch dims."""
    return _gather_nd(data, indices, 0)


_UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_apply(
    out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str, op_name: str
) -> None:
    """out[where] = updates, or combine with `reduction`; duplicates are applied in order."""
    if reduction == "none":
        out[where] = updates
        return
    if reduction not in _UFUNC:
        raise ValueError(f"{op_name}: unknown reduction '{reduction}'")
    _UFUNC[reduction].at(out, where, updates)


def _scatter_elements(
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    axis: int,
    reduction: str,
    op_name: str,
) -> np.ndarray:
    axis = norm_axis(axis, data.ndim, op_name)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise ValueError(
            f"{op_name}: indices {list(indices.shape)} and updates {list(updates.shape)} "
            f"must match and have the rank of data {list(data.shape)}"
        )
    pairs = enumerate(zip(indices.shape, data.shape, strict=True))
    if any(i > d for a, (i, d) in pairs if a != axis):
        raise IndexError(
            f"{op_name}: indices {list(indices.shape)} exceed data {list(data.shape)} "
            f"off axis {axis}"
        )
    idx = _checked(indices, data.shape[axis], op_name, f"axis {axis}")
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = idx
    out = data.copy()
    _scatter_apply(out, tuple(grid), updates, reduction, op_name)
    return out


@op("ScatterElements", since=16)
def scatter_elements(
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    *,
    axis: int = 0,
    reduction: str = "none",
) -> np.ndarray:
    """Copy of data with out[..indices[i,j]..] = updates[i,j] (or combined by reduction).

    add/mul/min/max apply every duplicate index in order; 'none' with duplicates is
    undefined by the spec (the last write wins here).
    """
    return _scatter_elements(data, indices, updates, axis, reduction, "ScatterElements")


@op("ScatterElements", since=11)
def scatter_elements_v11(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, axis: int = 0
) -> np.ndarray:
    """Opsets 11-15: no reduction."""
    return _scatter_elements(data, indices, updates, axis, "none", "ScatterElements")


@op("Scatter", since=9)
def scatter(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, axis: int = 0
) -> np.ndarray:
    """Deprecated alias of ScatterElements without reduction (opsets 9-10, 11)."""
    return _scatter_elements(data, indices, updates, axis, "none", "Scatter")


def _scatter_nd(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str
) -> np.ndarray:
    k = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or k > data.ndim:
        raise ValueError(f"ScatterND: indices {list(indices.shape)} vs data rank {data.ndim}")
    want = indices.shape[:-1] + data.shape[k:]
    if updates.shape != want:
        raise ValueError(f"ScatterND: updates shape {list(updates.shape)}, expected {list(want)}")
    idx = np.asarray(indices).astype(np.int64).reshape(-1, k)  # (M, k)
    where = tuple(_checked(idx[:, j], data.shape[j], "ScatterND", f"dim {j}") for j in range(k))
    out = data.copy()
    _scatter_apply(out, where, updates.reshape(-1, *data.shape[k:]), reduction, "ScatterND")
    return out


@op("ScatterND", since=16)
def scatter_nd(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, reduction: str = "none"
) -> np.ndarray:
    """Copy of data with slices at indices[..., :] replaced (or combined by reduction)."""
    return _scatter_nd(data, indices, updates, reduction)


@op("ScatterND", since=11)
def scatter_nd_v11(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """Opsets 11-15: no reduction."""
    return _scatter_nd(data, indices, updates, "none")


@op("TensorScatter", since=24)
def tensor_scatter(
    past_cache: np.ndarray,
    update: np.ndarray,
    write_indices: np.ndarray | None = None,
    *,
    axis: int = -2,
    mode: str = "linear",
) -> np.ndarray:
    """KV-cache write: present = past with update[b, ..., s, ...] at sequence write_indices[b] + s.

    Shapes differ only on `axis` (max_sequence_length vs sequence_length); mode
    'circular' wraps the write position modulo max_sequence_length.
    """
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter: unknown mode '{mode}'")
    axis = norm_axis(axis, past_cache.ndim, "TensorScatter")
    if axis == 0:
        raise ValueError("TensorScatter: axis cannot be the batch axis 0")
    ps, us = past_cache.shape, update.shape
    if len(us) != len(ps) or any(
        p != u for i, (p, u) in enumerate(zip(ps, us, strict=True)) if i != axis
    ):
        raise ValueError(f"TensorScatter: update {list(us)} does not fit cache {list(ps)}")
    max_len, seq = ps[axis], us[axis]
    if seq > max_len:
        raise ValueError(f"TensorScatter: update length {seq} > cache length {max_len}")
    batch = ps[0]
    starts = np.zeros(batch, np.int64) if write_indices is None else np.asarray(write_indices)
    out = past_cache.copy()
    for b in range(batch):
        pos = int(starts[b]) + np.arange(seq)
        if mode == "circular":
            pos %= max_len
        elif seq and (pos[0] < 0 or pos[-1] >= max_len):
            raise IndexError(
                f"TensorScatter: writes [{pos[0]}, {pos[-1]}] outside cache length "
                f"{max_len} (batch {b})"
            )
        # out[b] is a view; one advanced index on `axis` keeps the other axes in place.
        out[b][(*([slice(None)] * (axis - 1)), pos)] = update[b]
    return out
