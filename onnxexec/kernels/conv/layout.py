"""How a conv weight (M, Cg, KH, KW) is stored in memory, as data (issue 27).

passes/conv_layout.py re-stores a constant KxK weight "OHWI": an (M, KH, KW, Cg)
C-contiguous array seen through the transposed (M, Cg, KH, KW) view, so the model's
tensor is unchanged. Which storage a weight has is decided once, when its node is
planned (ops/fused_linear.py `prepare_conv`), and handed to conv2d as a
`WeightLayout`; the kernels' path choice does not inspect strides per call. A weight
that arrives without prepared state (a computed weight, a direct kernel call) is
classified by `layout_of` at the call.

No numba import here.
"""

from __future__ import annotations

import enum

import numpy as np


class WeightLayout(enum.Enum):
    """Memory order of a (M, Cg, KH, KW) float32 conv weight."""

    OIHW = "OIHW"  # C-contiguous as declared (or any other order): the im2col paths
    OHWI = "OHWI"  # (M, KH, KW, Cg) C-contiguous: the direct, rows and tap-GEMM paths


def layout_of(w: np.ndarray) -> WeightLayout:
    """OHWI when w (M, Cg, KH, KW) float32 is a view of an (M, KH, KW, Cg) C-contiguous
    array (what conv_taps.to_ohwi returns), else OIHW."""
    if w.ndim == 4 and w.dtype == np.float32 and w.transpose(0, 2, 3, 1).flags.c_contiguous:
        return WeightLayout.OHWI
    return WeightLayout.OIHW
