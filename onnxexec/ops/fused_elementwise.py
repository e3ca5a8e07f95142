"""onnxexec::FusedElementwise: a chain of elementwise float32 ops in one pass (graph
pass fuse_elementwise; program format in kernels/math/ewise.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.ewise import NUMPY_FNS, run, run_reference
from onnxexec.kernels.math.special import erf
from onnxexec.ops.activation import stable_sigmoid
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


# the reference table, with the unfused handlers' sigmoid (stable: no early underflow
# for x < -88, as the numba kernel) and erf in float32
_NUMPY_OPS: dict[int, Callable[..., Any]] = {**cast(dict, NUMPY_FNS), 13: stable_sigmoid, 18: erf}


def _small(inputs: tuple[np.ndarray, ...], program, constants, result, out_shape) -> np.ndarray:
    """The program on float32 numpy arrays (numpy broadcasting, one ufunc per op)."""
    regs: list = [*inputs, *(np.float32(c) for c in constants)]
    regs += [None] * (max(program[1::4], default=0) + 1 - len(regs))
    with np.errstate(all="ignore"):
        for q in range(0, len(program), 4):
            code, o, a, b = program[q : q + 4]
            fn = _NUMPY_OPS[code]
            regs[o] = fn(regs[a], regs[b]) if code < 10 else fn(regs[a])
    y = np.broadcast_to(regs[result], out_shape)
    # a fresh float32 array (a register may be an input itself, or float64 from erf)
    return np.array(y, dtype=np.float32)


@op("FusedElementwise", 1, domain="onnxexec")
def fused_elementwise(
    *inputs: np.ndarray,
    program: tuple[int, ...],
    constants: tuple[float, ...] = (),
    result: int = 0,
    registers: int = 0,
) -> np.ndarray:
    """Apply the register program (op, dst, a, b quadruples) to the broadcast inputs."""
    out_shape = np.broadcast_shapes(*(x.shape for x in inputs))
    small = math.prod(out_shape) <= _SMALL and len(program) // 4 <= 32 + 8 * len(inputs)
    if small and all(x.dtype == np.float32 for x in inputs):
        return _small(inputs, program, constants, result, out_shape)
    prog = np.asarray(program, dtype=np.int64).reshape(-1, 4)
    consts = np.asarray(constants, dtype=np.float32)
    rows = [_as_rows(x, out_shape) for x in inputs]
    if all(x.dtype == np.float32 for x in inputs) and out_shape:
        return run(prog, consts, rows, out_shape, result, registers)
    y = run_reference(prog, consts, rows, out_shape or (1,), result, registers)
    return y.reshape(out_shape).astype(inputs[0].dtype)
