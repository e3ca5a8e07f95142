"""Special functions numpy lacks, compiled with numba (no SciPy dependency)."""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.vectorize(["float32(float32)", "float64(float64)"], cache=True)
def _erf(x):
    return math.erf(x)


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise Gauss error function; float16/bfloat16 are computed in float32."""
    if x.dtype in (np.float32, np.float64):
        return _erf(x)
    return _erf(x.astype(np.float32)).astype(x.dtype)
