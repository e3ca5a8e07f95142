"""Op codes of the fused elementwise program (kernels/math/ewise.py), without numba: the
fusion pass reads them for every model, and importing the kernel module would load
numba even for a model that fuses no chain."""

from __future__ import annotations

from typing import Final

OPS: Final[dict[str, int]] = {
    "Add": 0,
    "Sub": 1,
    "Mul": 2,
    "Div": 3,
    "Max": 4,
    "Min": 5,
    "Neg": 10,
    "Abs": 11,
    "Relu": 12,
    "Sigmoid": 13,
    "Tanh": 14,
    "Exp": 15,
    "Sqrt": 16,
    "Reciprocal": 17,
    "Erf": 18,
}
BINARY: Final = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min"})
