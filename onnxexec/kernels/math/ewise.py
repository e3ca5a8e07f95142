"""A fused chain of elementwise float32 ops, evaluated row by row in one pass (numba).

The chain is a small register program: registers 0..k-1 hold the k inputs (each row
of an input is broadcast to the output row: a full row, a per-row scalar, or a row
repeating every `rows_in` output rows, which covers biases, scalars and (T, D)
tables shared across heads), the next ones the scalar constants, then temporaries.
An instruction (op, dst, a, b) writes register dst from a (and b). Every instruction
is one vectorized loop over the row, so a chain of n ops reads and writes memory once
instead of n times. Reference: `run_reference` (the same program on numpy arrays).

The inputs reach the kernel as a tuple of (rows_in, D or 1) float32 C arrays, padded
with 1x1 dummies to a power-of-two length (their count is an argument): a tuple, unlike
numba's typed List, has a numba-free call key, so a stored kernel runs without
importing numba (kernels/objload, issue 21), and the padding keeps the overloads to one
per power of two rather than one per input count.
"""

from __future__ import annotations

import math

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.math.ewise_ops import BINARY, OPS  # noqa: F401  (the pass reads them)
from onnxexec.kernels.math.vmath import erf32, exp_row, tanh32
from onnxexec.native.parallel import parallel_for

f32 = np.float32


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _rows(prog, consts, ins, k, rows_in, out, n_regs, result, r0, r1):
    d = out.shape[1]
    regs = np.empty((n_regs, d), dtype=np.float32)
    scratch = np.empty(d, dtype=np.int32)
    for c in range(consts.shape[0]):
        for j in range(d):
            regs[k + c, j] = consts[c]
    for r in range(r0, r1):
        for i in range(k):
            src = ins[i][r % rows_in[i]]
            dst = regs[i]
            if src.shape[0] == d:
                for j in range(d):
                    dst[j] = src[j]
            else:
                v = src[0]
                for j in range(d):
                    dst[j] = v
        for q in range(prog.shape[0]):
            op, o, a, b = prog[q, 0], prog[q, 1], prog[q, 2], prog[q, 3]
            y, x = regs[o], regs[a]
            z = regs[b]
            if op == 0:
                for j in range(d):
                    y[j] = x[j] + z[j]
            elif op == 1:
                for j in range(d):
                    y[j] = x[j] - z[j]
            elif op == 2:
                for j in range(d):
                    y[j] = x[j] * z[j]
            elif op == 3:
                for j in range(d):
                    y[j] = x[j] / z[j]
            elif op == 4:  # np.maximum: a NaN on either side gives NaN
                for j in range(d):
                    a, c = x[j], z[j]
                    y[j] = a if (a >= c) | (a != a) else c
            elif op == 5:
                for j in range(d):
                    a, c = x[j], z[j]
                    y[j] = a if (a <= c) | (a != a) else c
            elif op == 10:
                for j in range(d):
                    y[j] = -x[j]
            elif op == 11:
                for j in range(d):
                    y[j] = abs(x[j])
            elif op == 12:
                for j in range(d):
                    y[j] = max(x[j], f32(0.0))
            elif op == 13:  # ops/activation.py's form: e / (1 + e) for x < 0
                for j in range(d):
                    y[j] = -abs(x[j])
                exp_row(y, y, scratch)
                for j in range(d):
                    e = y[j]
                    y[j] = f32(1.0) / (f32(1.0) + e) if x[j] >= f32(0.0) else e / (f32(1.0) + e)
            elif op == 14:
                for j in range(d):
                    y[j] = tanh32(x[j])
            elif op == 15:
                exp_row(x, y, scratch)
            elif op == 16:
                for j in range(d):
                    y[j] = np.sqrt(x[j])
            elif op == 17:
                for j in range(d):
                    y[j] = f32(1.0) / x[j]
            elif op == 18:
                for j in range(d):
                    y[j] = erf32(x[j])
        res = regs[result]
        orow = out[r]
        for j in range(d):
            orow[j] = res[j]


_PAD = np.zeros((1, 1), dtype=np.float32)
_PAD.flags.writeable = False


def _as_kernel_input(x: np.ndarray) -> np.ndarray:
    """A read-only view of x as an aligned C-contiguous float32 2-D array: every element
    of the tuple then has one numba type (a mix of read-only and writeable arrays is a
    heterogeneous tuple, which a loop variable can't index); the kernel only reads it.
    Copies only what is not already float32, C-contiguous and aligned."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != 2:
        a = a.reshape(a.shape[0] if a.ndim else 1, -1)
    if not a.flags.aligned:
        a = a.copy()
    view = a.view()
    view.flags.writeable = False  # on a view: x itself stays writeable
    return view


def run(
    prog: np.ndarray,
    consts: np.ndarray,
    inputs: list[np.ndarray],
    out_shape: tuple,
    result: int,
    n_regs: int,
) -> np.ndarray:
    """Evaluate the program; each input is (rows_in, D or 1) for an (R, D) output."""
    d = out_shape[-1] if out_shape else 1
    total = math.prod(out_shape)
    rows = total // d if d else 0
    out = np.empty((rows, d), dtype=np.float32)
    if total == 0:
        return out.reshape(out_shape)
    ins = tuple(_as_kernel_input(x) for x in inputs)
    k = len(ins)
    ins += (_PAD,) * ((1 << (k - 1).bit_length()) - k)
    rows_in = np.array([x.shape[0] for x in inputs], dtype=np.int64)

    def part(r0: int, r1: int) -> None:
        _rows(prog, consts, ins, k, rows_in, out, n_regs, result, r0, r1)

    parallel_for(part, rows, min_chunk=max(1, 65536 // max(d, 1)))
    return out.reshape(out_shape)


NUMPY_FNS = {
    0: np.add,
    1: np.subtract,
    2: np.multiply,
    3: np.divide,
    4: np.maximum,
    5: np.minimum,
    10: np.negative,
    11: np.abs,
    12: lambda x: np.maximum(x, 0),
    13: lambda x: 1 / (1 + np.exp(-x)),
    14: np.tanh,
    15: np.exp,
    16: np.sqrt,
    17: lambda x: 1 / x,
    18: np.vectorize(math.erf, otypes=[np.float64]),
}


def run_reference(
    prog: np.ndarray,
    consts: np.ndarray,
    inputs: list[np.ndarray],
    out_shape: tuple,
    result: int,
    n_regs: int,
) -> np.ndarray:
    """The program evaluated with float64 numpy ops (reference for tests)."""
    d = out_shape[-1] if out_shape else 1
    rows = math.prod(out_shape) // d if d else 0
    regs: list = [None] * n_regs
    for i, x in enumerate(inputs):
        idx = np.arange(rows) % x.shape[0]
        regs[i] = np.broadcast_to(x[idx].astype(np.float64), (rows, d))
    for c, v in enumerate(consts):
        regs[len(inputs) + c] = np.float64(v)
    for op, o, a, b in prog:
        fn = NUMPY_FNS[int(op)]
        regs[o] = fn(regs[a], regs[b]) if op < 10 else fn(regs[a])
    return np.broadcast_to(regs[result], (rows, d)).astype(np.float32).reshape(out_shape)
