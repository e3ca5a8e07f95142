"""Special functions numpy lacks, compiled with numba (no SciPy dependency)."""

from __future__ import annotations

import math

import numpy as np

from onnxexec.kernels import objload as nb


@nb.njit(cache=True, nogil=True)
def _erf(x, out):
    """out[i] = erf(x[i]) over flat contiguous float32/float64 arrays."""
    for i in range(x.size):
        out[i] = math.erf(x[i])


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise Gauss error function; float16/bfloat16 are computed in float32.

    Compiled lazily on first use (per dtype) and cached on disk, so importing the op
    registry costs no compilation.
    """
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    flat = np.ascontiguousarray(work).reshape(-1)
    out = np.empty_like(flat)
    _erf(flat, out)
    return out.reshape(x.shape).astype(x.dtype, copy=False)
