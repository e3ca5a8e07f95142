"""Activation kinds of the fused epilogues (FusedMatMul, FusedConv, FusedGelu...): one
definition for the graph passes and ops that pick a kind and the kernels that apply it.

No numba here: ops and passes import this without loading the compiler. Numba kernels
compare their integer argument with the members (`code == Activation.CLIP`), which
numba folds to integer constants. Kernel arguments are plain ints (`ACT`'s values, or
`int(Activation.X)`): an IntEnum member passed as an argument would be typed as its own
numba overload and miss the recorded object code (kernels/objload).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class Activation(IntEnum):
    """alpha / beta are the ONNX op's attributes (Clip: min / max, LeakyRelu: alpha,
    HardSigmoid: alpha / beta); Gelu / GeluTanh with alpha 1 round x * (1 + erf)
    before the 0.5 (kernels/math/activations.py)."""

    NONE = 0
    RELU = 1
    GELU = 2
    GELU_TANH = 3
    SIGMOID = 4
    SILU = 5
    HARD_SWISH = 6
    CLIP = 7
    LEAKY_RELU = 8
    TANH = 9
    HARD_SIGMOID = 10


# The fused ops' `activation` attribute (ONNX op names; "" none) -> kernel argument.
ACT: Final[dict[str, int]] = {
    "": int(Activation.NONE),
    "Relu": int(Activation.RELU),
    "Gelu": int(Activation.GELU),
    "GeluTanh": int(Activation.GELU_TANH),
    "Sigmoid": int(Activation.SIGMOID),
    "Silu": int(Activation.SILU),
    "HardSwish": int(Activation.HARD_SWISH),
    "Clip": int(Activation.CLIP),
    "LeakyRelu": int(Activation.LEAKY_RELU),
    "Tanh": int(Activation.TANH),
    "HardSigmoid": int(Activation.HARD_SIGMOID),
}

# Kinds that are a compare or two of one value (no transcendental): the one-pass
# epilogue and the direct / depthwise kernels' clamp apply them.
PIECEWISE: Final = frozenset(
    {Activation.NONE, Activation.RELU, Activation.CLIP, Activation.LEAKY_RELU}
)
# What the AVX-512 tile kernels apply themselves: a clamp (Relu: [0, inf), Clip).
CLAMPS: Final = frozenset({Activation.NONE, Activation.RELU, Activation.CLIP})
