"""FusedElementwise's two paths (numpy ufuncs below ops.fused_elementwise._SMALL output
elements, the numba kernel above) against the float64 reference program."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.math.ewise import run_reference
from onnxexec.kernels.math.ewise_ops import OPS
from onnxexec.ops import fused_elementwise as fe

# registers: 0 x, 1 b (a row), 2 the constant 0.5, then one temporary per instruction
_CHAIN = ["Mul", "Add", "Sigmoid", "Sub", "Tanh", "Abs", "Sqrt", "Erf", "Neg", "Exp"]
_CHAIN += ["Max", "Min", "Relu", "Reciprocal", "Div"]


def _program() -> tuple[int, ...]:
    prog: list[int] = []
    cur, nxt = 0, 3
    for name in _CHAIN:
        code = OPS[name]
        other = 1 if name in ("Mul", "Add", "Max", "Div") else 2
        prog += [code, nxt, cur, other if code < 10 else cur]
        cur, nxt = nxt, nxt + 1
    return tuple(prog)


@pytest.mark.parametrize("rows", [4, 200])  # 4 x 64 numpy path, 200 x 64 the kernel
def test_paths_match_reference(rows: int) -> None:
    assert (rows * 64 <= fe._SMALL) == (rows == 4)
    rng = np.random.default_rng(rows)
    x = (rng.standard_normal((rows, 64)) * 3).astype(np.float32)
    x[0, :4] = (-100.0, -90.0, 0.0, 90.0)  # sigmoid's underflow corner
    b = (rng.standard_normal(64) + 2).astype(np.float32)
    prog = _program()
    regs = 3 + len(_CHAIN)
    got = fe.fused_elementwise(
        x, b, program=prog, constants=(0.5,), result=regs - 1, registers=regs
    )
    want = run_reference(
        np.asarray(prog, np.int64).reshape(-1, 4),
        np.asarray([0.5], np.float32),
        [x, b.reshape(1, 64)],
        (rows, 64),
        regs - 1,
        regs,
    )
    assert got.dtype == np.float32 and got.shape == (rows, 64)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    assert not np.shares_memory(got, x)
