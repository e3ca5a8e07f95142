"""Direct calls for tiny elementwise ops: the compiled schedule (schedule.py) calls
these in place of the handler when every input is a float32 ndarray.

A handler such as Add's spends most of a [64]-element call on its wrapping (widen,
narrow, the fp-error context check), not on the ufunc. For float32 inputs that
wrapping is the identity: widen/narrow keep float32, and the executor's run-wide
np.errstate(all="ignore") stands in for the handler's own (elementwise.FP_QUIET). So
here each op maps to the ufunc the handler applies, called with nothing around it;
the executor checks the dtypes before the call and wraps a 0-d result (a ufunc gives
a numpy scalar there) back into an ndarray, as elementwise.narrow does.

Only attribute-free handlers qualify (the schedule passes no keyword arguments), and
binary ops from opset 7 (numpy broadcasting; opsets 1-6 broadcast by attribute),
plus ReduceSum / ReduceMean over all axes with their attributes bound here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.ops.activation import stable_sigmoid
from onnxexec.ops.elementwise import UNARY
from onnxexec.ops.reduce import FAST_MIN
from onnxexec.ops.registry import Handler

# The dtype the fast path is checked against (`a.dtype is F32`: numpy shares one dtype
# object per native builtin type, so a byte-swapped or subclass array fails the check
# and takes the handler).
F32 = np.dtype(np.float32)

_ZERO32 = np.float32(0)


def _relu32(x: np.ndarray) -> Any:
    # x first, as activation._relu: np.maximum returns its first operand on a tie, so
    # Relu(-0.0) stays -0.0 as the handler (and the fused kernels) give it
    return np.maximum(x, _ZERO32)


_BINARY: dict[str, Callable[..., Any]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.true_divide,  # float Div is true division (math._div)
    # comparisons give bool (logic._as_bool); on floats Equal is ==
    "Equal": np.equal,
    "Greater": np.greater,
    "Less": np.less,
    "GreaterOrEqual": np.greater_equal,
    "LessOrEqual": np.less_equal,
}

# The handlers' own functions for float32 (elementwise.UNARY, activation.py), minus
# Erf, whose kernel computes in float64 and relies on the handler to round back.
_UNARY_FAST: dict[str, Callable[..., Any]] = {
    name: fn for name, (fn, _since, _legacy, _doc) in UNARY.items() if name != "Erf"
}
_UNARY_FAST.update(
    {
        "Tanh": np.tanh,
        "Sigmoid": stable_sigmoid,  # the stable form the handler applies (compiled: fast_fn)
        "Relu": _relu32,
    }
)


_REDUCE_KINDS = {"ReduceSum": False, "ReduceMean": True}
_REDUCE_ATTRS = frozenset({"keepdims", "noop_with_empty_axes", "axes"})


def _reduce_all(handler: Handler, kwargs: dict[str, Any]) -> Callable[..., Any] | None:
    """ReduceSum / ReduceMean of float32 over every axis, as reduce._sum computes it
    (summed in float64 as np.sum does, rounded, then divided by the count in float32);
    tensors from reduce.FAST_MIN elements on take the handler (its numba kernel)."""
    mean = _REDUCE_KINDS.get(handler.op_type)
    if mean is None or not set(kwargs) <= _REDUCE_ATTRS or kwargs.get("axes"):
        return None
    if kwargs.get("noop_with_empty_axes"):
        return None
    keep = bool(kwargs.get("keepdims", 1))
    fn, f64 = handler.fn, np.float64
    add: Any = np.add.reduce  # positional keepdims (numpy's stubs type it by keyword)

    def reduce_all(x: np.ndarray) -> Any:
        if x.size >= FAST_MIN:
            return fn(x, **kwargs)
        s = np.asarray(add(x, tuple(range(x.ndim)), f64, None, keep)).astype(F32)
        return s / x.size if mean else s

    return reduce_all


def fast_fn(
    handler: Handler, n_inputs: int, kwargs: dict[str, Any] | None
) -> Callable[..., Any] | None:
    """The direct float32 call for `handler`'s node, or None when it has none."""
    if handler.domain:
        return None
    if kwargs:
        return _reduce_all(handler, kwargs) if n_inputs == 1 else None
    if handler.since < 6:  # opset-1 forms: consumed_inputs, legacy broadcasting
        return None
    if n_inputs == 2 and handler.since >= 7:
        return _BINARY.get(handler.op_type)
    if n_inputs == 1:
        if handler.op_type == "Sigmoid":
            return sigmoid32()
        return _UNARY_FAST.get(handler.op_type)
    return None


def sigmoid32() -> Callable[[np.ndarray], np.ndarray]:
    """The handler's float32 Sigmoid, compiled for tiny tensors (kernels/math/sigmoid.py:
    the same float64 formula, ~5x cheaper up to ~64 elements, numpy's form from SMALL
    on), imported here so that a model without a Sigmoid does not load numba."""
    from onnxexec.kernels.math.sigmoid import SMALL
    from onnxexec.kernels.math.sigmoid import sigmoid32 as kernel

    def sigmoid(x: np.ndarray) -> np.ndarray:
        return kernel(x) if x.size <= SMALL else stable_sigmoid(x)

    return sigmoid
