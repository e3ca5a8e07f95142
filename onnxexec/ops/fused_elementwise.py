"""onnxexec::FusedElementwise: a chain of elementwise float32 ops in one pass (graph
pass fuse_elementwise; program format in kernels/math/ewise.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.ewise import NUMPY_FNS, run, run_reference
from onnxexec.kernels.math.special import erf
from onnxexec.ops.activation import stable_sigmoid
from onnxexec.ops.elementwise import FP_QUIET
from onnxexec.ops.registry import op


def _as_rows(x: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    """x as (rows_in, D or 1) such that output row r reads row r % rows_in; a broadcast
    pattern that is not of that form is materialized to (R, D)."""
    d = out_shape[-1] if out_shape else 1
    s = (1,) * (len(out_shape) - x.ndim) + x.shape
    lead, last = s[:-1] if s else (), s[-1] if s else 1
    k = 0
    while k < len(lead) and lead[k] == 1:
        k += 1
    if last in (1, d) and tuple(lead[k:]) == tuple(out_shape[k:-1]):
        return x.reshape(math.prod(lead[k:]), last)
    return np.broadcast_to(x, out_shape).reshape(-1, d)


# Small outputs run the program as numpy ufuncs on the whole arrays when that is
# cheaper than the numba call's setup (a typed List of the inputs, a parallel_for
# dispatch): ~25 us plus ~5 us per input against ~1.5 us per instruction, measured on
# 2 loaded cores (a stateful model's [1, 64] branches: numpy; a 100-op chain on one
# tiny input: numba).
_SMALL = tuning.FUSED_ELEMENTWISE_SMALL


_F32 = np.dtype(np.float32)
_ZERO32 = np.float32(0)


def _relu(x: Any) -> Any:
    # the reference's np.maximum(x, 0) without converting the Python 0 on every call
    return np.maximum(x, _ZERO32)


# the reference table, with the unfused handlers' sigmoid (stable: no early underflow
# for x < -88, as the numba kernel) and erf in float32
_NUMPY_OPS: dict[int, Callable[..., Any]] = {
    **cast(dict, NUMPY_FNS),
    12: _relu,
    13: stable_sigmoid,
    18: erf,
}

# (ufunc, dst, a, b or -1 for a unary op) per instruction, the constants as float32,
# the register count, the graph-constant array inputs (index, array) and their views
# padded to an output rank (rank -> ((index, array, padded view), ...), filled on use):
# what the numpy path reads, decoded once per node
Compiled = tuple[
    tuple[tuple[Callable[..., Any], int, int, int], ...],
    tuple[Any, ...],
    int,
    tuple[tuple[int, np.ndarray], ...],
    dict[int, tuple[tuple[int, np.ndarray, np.ndarray], ...]],
]


def _sigmoid_fn() -> Callable[[Any], Any]:
    """Sigmoid for `_small`: the compiled float32 form (kernels/math/sigmoid.py, the
    same float64 formula as `stable_sigmoid`, ~5x cheaper on a tiny row) for float32 arrays
    up to its SMALL; a larger one, a scalar or a float64 register (after Erf) takes
    `stable_sigmoid` as before."""
    from onnxexec.kernels.math.sigmoid import SMALL, sigmoid32

    nd = np.ndarray

    def sigmoid(x: Any) -> Any:
        if type(x) is nd and x.dtype is _F32 and x.size <= SMALL:
            return sigmoid32(x)
        return stable_sigmoid(x)

    return sigmoid


def _compile(inputs: tuple[Any, ...], attrs: dict[str, Any]) -> Compiled:
    """The prepare hook (ops/registry.py): the program decoded for `_small`."""
    program = attrs.get("program", ())  # missing: the planner reports the attribute
    table = _NUMPY_OPS
    if 13 in program[0::4]:
        table = {**_NUMPY_OPS, 13: _sigmoid_fn()}
    steps = tuple(
        (table[program[q]], program[q + 1], program[q + 2], program[q + 3])
        if program[q] < 10
        else (table[program[q]], program[q + 1], program[q + 2], -1)
        for q in range(0, len(program), 4)
    )
    consts = tuple(np.float32(c) for c in attrs.get("constants", ()))
    arrays = tuple(
        (i, c) for i, c in enumerate(inputs) if type(c) is np.ndarray and c.dtype == _F32 and c.ndim
    )
    return steps, consts, max(program[1::4], default=0) + 1, arrays, {}


def _padded(inputs: tuple[np.ndarray, ...], compiled: Compiled, rank: int) -> Any:
    """`inputs` with each graph-constant array of lower rank than the output read as a
    view padded with leading 1s: the same broadcast, but numpy's equal-shape loops cost
    about a third of its broadcasting ones on a tiny tensor (~1 us against ~3 us on
    [1, 64] float32). An input that is not the planned array (fed) stays as it is."""
    views = compiled[4].get(rank)
    if views is None:
        views = compiled[4][rank] = tuple(
            (i, c, c.reshape((1,) * (rank - c.ndim) + c.shape))
            for i, c in compiled[3]
            if c.ndim < rank
        )
    if not views:
        return inputs
    ins = list(inputs)
    for i, c, v in views:
        if ins[i] is c:
            ins[i] = v
    return ins


def _small(
    inputs: tuple[np.ndarray, ...], compiled: Compiled, result: int, out_shape: tuple
) -> np.ndarray:
    """The program on float32 numpy arrays (numpy broadcasting, one ufunc per op)."""
    steps, consts, n_regs = compiled[:3]
    regs: list = [*_padded(inputs, compiled, len(out_shape)), *consts]
    fixed = len(regs)
    regs += [None] * (n_regs - fixed)
    with nullcontext() if FP_QUIET.get() else np.errstate(all="ignore"):
        for fn, o, a, b in steps:
            regs[o] = fn(regs[a]) if b < 0 else fn(regs[a], regs[b])
    y = regs[result]
    # an instruction's result is a fresh array: handed out as it is when it has the
    # node's shape and type (a register may be an input, a scalar, or float64 from erf)
    if result >= fixed and type(y) is np.ndarray and y.dtype is _F32 and y.shape == out_shape:
        return y
    return np.array(np.broadcast_to(y, out_shape), dtype=np.float32)


def _out_shape(inputs: tuple[np.ndarray, ...]) -> tuple[int, ...]:
    # np.broadcast is C (up to 64 operands); np.broadcast_shapes builds Python objects
    if 1 < len(inputs) <= 32:
        return np.broadcast(*inputs).shape
    return np.broadcast_shapes(*(x.shape for x in inputs))


@op("FusedElementwise", 1, domain="onnxexec", prepare=_compile)
def fused_elementwise(
    *inputs: np.ndarray,
    program: tuple[int, ...],
    constants: tuple[float, ...] = (),
    result: int = 0,
    registers: int = 0,
    prepared: Compiled | None = None,
) -> np.ndarray:
    """Apply the register program (op, dst, a, b quadruples) to the broadcast inputs."""
    out_shape = _out_shape(inputs)
    small = math.prod(out_shape) <= _SMALL and len(program) // 4 <= 32 + 8 * len(inputs)
    if small and all(x.dtype == np.float32 for x in inputs):
        compiled = prepared or _compile((), {"program": program, "constants": constants})
        return _small(inputs, compiled, result, out_shape)
    prog = np.asarray(program, dtype=np.int64).reshape(-1, 4)
    consts = np.asarray(constants, dtype=np.float32)
    rows = [_as_rows(x, out_shape) for x in inputs]
    if all(x.dtype == np.float32 for x in inputs) and out_shape:
        return run(prog, consts, rows, out_shape, result, registers)
    y = run_reference(prog, consts, rows, out_shape or (1,), result, registers)
    return y.reshape(out_shape).astype(inputs[0].dtype)
