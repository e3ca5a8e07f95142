"""Reductions: the ten Reduce* ops, CumSum and CumProd.

Axes moved from an attribute to an optional input at opset 13 (ReduceSum) or 18 (the
others), which also added noop_with_empty_axes. A reduction over an empty set gives the
identity element: 0 for sums, 1 for products, -inf/+inf (or the dtype's min/max) for
max/min, -inf for the log-sums, NaN for the mean (0/0).

float16/bfloat16 accumulate in float32; integers in 64 bits; results keep the input dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.ops.common import ints, norm_axes, norm_axis
from onnxexec.ops.registry import op


def _acc_dtype(dt: np.dtype) -> np.dtype:
    if dt.kind == "f" and dt.itemsize >= 4:
        return dt
    if dt.kind in "fV" or dt.name == "bfloat16":
        return np.dtype(np.float32)
    if dt.kind == "i":
        return np.dtype(np.int64)
    if dt.kind in "u":
        return np.dtype(np.uint64)
    return dt


def _extreme(dt: np.dtype, largest: bool) -> object:
    """Identity element of max (largest=False gives -inf) / min (largest=True gives +inf)."""
    if dt.kind == "b":
        return largest
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.max if largest else info.min
    return np.inf if largest else -np.inf


def _sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    if x.dtype == np.float32:
        # Summed in float64, then rounded: a float32 sum overflows exactly when its true
        # value leaves float32's range, whatever the order. A float32 accumulator's
        # partial sums overflow or not by summation order (+3e38, -3e38, -3e38), which
        # the spec leaves open; the fused norm kernels (kernels/math/norms.py) give this
        # same order-free answer, so every optimization level agrees.
        with np.errstate(over="ignore"):
            s = np.sum(x, axis=axes, keepdims=keep, dtype=np.float64)
            return np.asarray(s).astype(np.float32)
    return np.sum(x, axis=axes, keepdims=keep, dtype=_acc_dtype(x.dtype))


def _logsumexp(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)  # all -inf (or empty) -> log(0) = -inf below
    s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keep else np.squeeze(s, axis=axes)


# kind -> (reduction on the accumulation dtype, elementwise result when noop applies)
_KINDS: dict[str, tuple[Callable, Callable]] = {
    "sum": (_sum, lambda x: x),
    "mean": (lambda x, a, k: _sum(x, a, k) / int(np.prod([x.shape[i] for i in a])), lambda x: x),
    "max": (
        lambda x, a, k: np.max(x, axis=a, keepdims=k, initial=_extreme(x.dtype, False)),
        lambda x: x,
    ),
    "min": (
        lambda x, a, k: np.min(x, axis=a, keepdims=k, initial=_extreme(x.dtype, True)),
        lambda x: x,
    ),
    "prod": (
        lambda x, a, k: np.prod(x, axis=a, keepdims=k, dtype=_acc_dtype(x.dtype)),
        lambda x: x,
    ),
    "l1": (lambda x, a, k: _sum(np.abs(x), a, k), np.abs),
    "l2": (lambda x, a, k: np.sqrt(_sum(x * x, a, k)), np.abs),
    "sum_square": (lambda x, a, k: _sum(x * x, a, k), lambda x: x * x),
    "log_sum": (lambda x, a, k: np.log(_sum(x, a, k)), np.log),
    "log_sum_exp": (_logsumexp, lambda x: x),
}


FAST_MIN = tuning.REDUCE_FAST_MIN  # elements: smaller reductions stay in numpy (and need no numba)


def _trailing_sum(
    kind: str, data: np.ndarray, axes: tuple[int, ...], keep: bool
) -> np.ndarray | None:
    """ReduceSum / ReduceMean of a big C-contiguous float32 tensor over its last axes
    (global average pooling) by kernels/math/reduce.sum_rows; None where it doesn't apply."""
    if kind not in ("sum", "mean") or data.dtype != np.float32 or data.size < FAST_MIN:
        return None
    axes = tuple(sorted(set(axes)))
    nd = data.ndim
    if axes != tuple(range(nd - len(axes), nd)) or not data.flags.c_contiguous:
        return None
    from onnxexec.kernels.math.reduce import sum_rows

    # math.prod, not np.prod: right after a conv job numpy's first calls run on a
    # cache the job evicted (~10 us each measured in-model), plain ints don't
    lead = data.shape[: nd - len(axes)]
    cols = math.prod(data.shape[nd - len(axes) :])
    out = np.empty(math.prod(lead), dtype=np.float32)
    sum_rows(data.reshape(-1, cols), 1.0 / cols if kind == "mean" else 1.0, out)
    shape = lead + (1,) * len(axes) if keep else lead
    return out.reshape(shape)


def _reduce(
    kind: str, data: np.ndarray, axes: tuple[int, ...] | None, keepdims: int, noop: int
) -> np.ndarray:
    reduce_fn, noop_fn = _KINDS[kind]
    dt = data.dtype
    x = data
    acc = _acc_dtype(dt)
    if dt.kind in "fV" and acc != dt:
        x = data.astype(acc)
    if not axes:
        if noop:
            # Operators.md ReduceLogSum-18: with no axes the reduction is the identity,
            # but composite ops still apply their elementwise step.
            return np.asarray(noop_fn(x)).astype(dt, copy=False)
        axes = tuple(range(data.ndim))
    else:
        axes = norm_axes(axes, data.ndim, f"Reduce[{kind}]")
    fast = _trailing_sum(kind, data, axes, bool(keepdims))
    if fast is not None:
        return fast
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = reduce_fn(x, tuple(sorted(set(axes))), bool(keepdims))
    out = np.asarray(out)
    if dt.kind in "iu" and out.dtype.kind == "f":
        out = np.trunc(out)
    return out.astype(dt, copy=False)


def _axes_input(axes: np.ndarray | None) -> tuple[int, ...] | None:
    return None if axes is None else ints(axes)


def _register(op_type: str, kind: str, input_since: int) -> None:
    """Register `op_type` with axes as an input from `input_since` and as an attribute before."""

    def reduce_axes_input(
        data: np.ndarray,
        axes: np.ndarray | None = None,
        *,
        keepdims: int = 1,
        noop_with_empty_axes: int = 0,
    ) -> np.ndarray:
        return _reduce(kind, data, _axes_input(axes), keepdims, noop_with_empty_axes)

    def reduce_axes_attr(
        data: np.ndarray, *, axes: tuple[int, ...] | None = None, keepdims: int = 1
    ) -> np.ndarray:
        return _reduce(kind, data, axes, keepdims, 0)

    name = op_type[len("Reduce") :].lower()
    reduce_axes_input.__name__ = f"reduce_{name}"
    reduce_axes_input.__doc__ = (
        f"{op_type} over `axes` (all when omitted; none with noop_with_empty_axes)."
    )
    reduce_axes_attr.__name__ = f"reduce_{name}_v1"
    reduce_axes_attr.__doc__ = f"{op_type}, opsets 1-{input_since - 1}: axes as an attribute."
    op(op_type, since=input_since)(reduce_axes_input)
    op(op_type, since=1)(reduce_axes_attr)


_register("ReduceSum", "sum", 13)
_register("ReduceMean", "mean", 18)
_register("ReduceMax", "max", 18)
_register("ReduceMin", "min", 18)
_register("ReduceProd", "prod", 18)
_register("ReduceL1", "l1", 18)
_register("ReduceL2", "l2", 18)
_register("ReduceSumSquare", "sum_square", 18)
_register("ReduceLogSum", "log_sum", 18)
_register("ReduceLogSumExp", "log_sum_exp", 18)


def _cumulative(
    ufunc: np.ufunc,
    identity: int,
    x: np.ndarray,
    axis: np.ndarray,
    exclusive: int,
    reverse: int,
    op_name: str,
) -> np.ndarray:
    ax = norm_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim, op_name)
    acc = _acc_dtype(x.dtype) if x.dtype.kind in "fV" else x.dtype
    y = np.flip(x, axis=ax) if reverse else x
    out = ufunc.accumulate(y.astype(acc, copy=False), axis=ax, dtype=acc)
    if exclusive:
        # Shift by one along the axis: out[0] = identity, out[i] = inclusive[i-1].
        first = [slice(None)] * x.ndim
        first[ax] = slice(0, 1)
        head = np.full_like(out[tuple(first)], identity)
        first[ax] = slice(0, -1)
        out = np.concatenate([head, out[tuple(first)]], axis=ax)
    if reverse:
        out = np.flip(out, axis=ax)
    return np.ascontiguousarray(out).astype(x.dtype, copy=False)


@op("CumSum", since=11)
def cum_sum(x: np.ndarray, axis: np.ndarray, *, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """Running sum along `axis`; exclusive drops the current element, reverse runs backwards."""
    return _cumulative(np.add, 0, x, axis, exclusive, reverse, "CumSum")


@op("CumProd", since=26)
def cum_prod(
    x: np.ndarray, axis: np.ndarray, *, exclusive: int = 0, reverse: int = 0
) -> np.ndarray:
    """Running product along `axis`; exclusive drops the current element, reverse runs backwards."""
    return _cumulative(np.multiply, 1, x, axis, exclusive, reverse, "CumProd")
