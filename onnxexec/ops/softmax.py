"""Softmax, LogSoftmax and Hardmax.

Opsets 1 and 11 (Operators.md Softmax-1/-11) coerce the input to 2-D at `axis`:
(prod(shape[:axis]), prod(shape[axis:])), normalise each row, and reshape back; so
for rank > 2 the reduction runs over *all* trailing dims, not one axis (onnx's
reference evaluator gets this wrong). Opset 13 normalises along the single `axis`.
float16/bfloat16 are computed in float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxexec.ops.common import norm_axis
from onnxexec.ops.elementwise import narrow
from onnxexec.ops.registry import op

Kernel = Callable[[np.ndarray, int], np.ndarray]


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.kind == "V" or x.dtype == np.float16 else x


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    """1 at the first maximum along `axis`, 0 elsewhere."""
    out = np.zeros_like(x)
    np.put_along_axis(out, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return out


def _along_axis(kernel: Kernel, x: np.ndarray, axis: int, op_type: str) -> np.ndarray:
    a = norm_axis(axis, x.ndim, op_type)
    if x.size == 0:
        return x.copy()
    with np.errstate(all="ignore"):
        return narrow(kernel(_f32(x), a), x.dtype)


def _coerced_2d(kernel: Kernel, x: np.ndarray, axis: int, op_type: str) -> np.ndarray:
    """Opsets 1-12: flatten to (prod(shape[:axis]), prod(shape[axis:])), apply per row.

    axis may equal the rank (each row is then a single element) or be negative (11+).
    """
    r = x.ndim
    if not -r <= axis <= r:
        raise ValueError(f"{op_type}: axis {axis} out of range for rank {r}")
    a = axis + r if axis < 0 else axis
    if x.size == 0:
        return x.copy()
    rows = int(np.prod(x.shape[:a], dtype=np.int64))
    cols = int(np.prod(x.shape[a:], dtype=np.int64))
    with np.errstate(all="ignore"):
        y = kernel(_f32(x).reshape(rows, cols), 1)
    return narrow(y.reshape(x.shape), x.dtype)


@op("Softmax", since=1)
def softmax_v1(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """Softmax over the rows of x coerced to 2-D at `axis` (opsets 1-12)."""
    return _coerced_2d(_softmax, x, axis, "Softmax")


@op("Softmax", since=13)
def softmax(x: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """exp(x) / sum(exp(x)) along `axis`."""
    return _along_axis(_softmax, x, axis, "Softmax")


@op("LogSoftmax", since=1)
def log_softmax_v1(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """log(softmax(x)) over the rows of x coerced to 2-D at `axis` (opsets 1-12)."""
    return _coerced_2d(_log_softmax, x, axis, "LogSoftmax")


@op("LogSoftmax", since=13)
def log_softmax(x: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) along `axis`."""
    return _along_axis(_log_softmax, x, axis, "LogSoftmax")


@op("Hardmax", since=1)
def hardmax_v1(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """One-hot of the first maximum of each row of x coerced to 2-D at `axis`."""
    return _coerced_2d(_hardmax, x, axis, "Hardmax")


@op("Hardmax", since=13)
def hardmax(x: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """One-hot of the first maximum along `axis`."""
    return _along_axis(_hardmax, x, axis, "Hardmax")
