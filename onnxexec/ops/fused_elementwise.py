"""onnxexec::FusedElementwise: a chain of elementwise float32 ops in one pass (graph
pass fuse_elementwise; program format in kernels/math/ewise.py)."""

from __future__ import annotations

import math

import numpy as np

from onnxexec.kernels.math.ewise import run, run_reference
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
    prog = np.asarray(program, dtype=np.int64).reshape(-1, 4)
    consts = np.asarray(constants, dtype=np.float32)
    rows = [_as_rows(x, out_shape) for x in inputs]
    if all(x.dtype == np.float32 for x in inputs) and out_shape:
        return run(prog, consts, rows, out_shape, result, registers)
    y = run_reference(prog, consts, rows, out_shape or (1,), result, registers)
    return y.reshape(out_shape).astype(inputs[0].dtype)
