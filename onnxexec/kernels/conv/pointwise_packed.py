"""The 1x1 convolution y (M, P) = act(W (M, C) @ X (C, P) + bias + z) on the packed
micro-kernels of kernels/linalg/sgemm_packed.py, block by block of output columns.

OpenBLAS's sgemm (the path in kernels/conv/conv_gemm.py) writes its output three times
when beta is 0: a scaling pass that zeroes C, the kernel's read-modify-write, and then
our epilogue's pass for bias / residual / activation. MobileNetV2's expand layers
write outputs of 1.2-4.8 MB with only 16-32 multiply-adds per element, so those
passes (past L2, 1 MB a core here) cost as much as the arithmetic, and two threads
streaming them gained 1.0-1.5x over one.

Here a span of output columns is cut into blocks of a few 32-column panels: each
block's X columns are packed into panels (sgemm_packed's B layout: (panels, C, 32)),
the tiles write the block's outputs once, and the epilogue runs on the block while it
is still in L2. The packing costs one read of X per span; X is the smaller operand of
every 1x1 layer whose columns are split.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels import tuning
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.linalg import sgemm_packed
from onnxexec.kernels.math.activations import epilogue_jit

AVAILABLE: Final = sgemm_packed.AVAILABLE
AVX512: Final = sgemm_packed.AVX512
NR: Final = sgemm_packed.NR
_BLOCK_FLOATS: Final = tuning.POINTWISE_PACKED_BLOCK_FLOATS

# Job arguments, as slots of the pool's int64 array (alpha / beta in its float64
# array): addresses of W (M, C), X (C, P), Y (M, P) (C-contiguous float32), of the
# bias (M,) and the residual z (M, P) or 0, then M, C, P, the activation code and the
# split axis (0: spans are row ranges over all columns, 1: column ranges over all rows).
PW, PX, PY, PBIAS, PZ, PM, PC, PP, PACT, PAXIS = range(10)
PW_ARGS: Final = 10
_NO_Z = np.zeros((1, 1), dtype=np.float32)
_NO_B = np.zeros(1, dtype=np.float32)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _pack_cols(x, j0, j1, nr, dst):
    """dst[q, k, t] = x[k, j0 + q nr + t] for columns [j0, j1), zero past j1."""
    c = x.shape[0]
    n = j1 - j0
    for q in range(-(-n // nr)):
        s = j0 + q * nr
        w = min(nr, j1 - s)
        panel = dst[q]
        for k in range(c):
            src = x[k, s : s + w]
            row = panel[k]
            for t in range(w):
                row[t] = src[t]
            for t in range(w, nr):
                row[t] = np.float32(0.0)


@nb.njit(cache=True)
def cols_for(m, nr):
    return max(1, min(16, _BLOCK_FLOATS // max(m * nr, 1))) * nr


def block_cols(m: int, nr: int = NR) -> int:
    """Output columns per block for m rows: a multiple of the panel width (at most 16
    panels) whose m x cols outputs stay around _BLOCK_FLOATS."""
    return int(cols_for(m, nr))


@nb.njit(nogil=True, cache=True, error_model="numpy")
def pointwise_block_span(
    w, x, y, yoff, bias, has_b, z, has_z, code, al, be, m0, m1, j0, j1, nr, cols
):
    """Rows [m0, m1) x columns [j0, j1) of x of y[:, yoff + j] = act(w @ x + bias[:, None]
    + z)[:, j], block of `cols` columns by block (see the module docstring); z has y's
    shape. yoff places a tile of columns (an im2col tile) in a wider output."""
    c = x.shape[0]
    p = y.shape[1]
    if m1 <= m0 or j1 <= j0:
        return
    panels = -(-cols // nr)
    # 64-byte aligned panels: every panel row load is one cache line
    raw = np.empty(panels * c * nr + 16, dtype=np.float32)
    skip = (-raw.ctypes.data % 64) // 4
    buf = raw[skip : skip + panels * c * nr].reshape(panels, c, nr)
    wa = w.ctypes.data + 4 * m0 * c
    rows = m1 - m0
    yr = y[m0:m1]
    br = bias[m0:m1] if has_b else bias
    zr = z[m0:m1] if has_z else z
    epi = has_b or has_z or code != Activation.NONE
    for b0 in range(j0, j1, cols):
        b1 = min(j1, b0 + cols)
        _pack_cols(x, b0, b1, nr, buf)
        sgemm_packed.packed_span(
            wa, c, rows, c, buf.ctypes.data, b1 - b0, y.ctypes.data + 4 * (m0 * p + yoff + b0), p,
            0, -(-(b1 - b0) // nr), nr,
        )  # fmt: skip
        if epi:
            epilogue_jit(yr, yoff + b0, yoff + b1, br, has_b, True, zr, has_z, code, al, be)


@nb.njit(nogil=True, cache=True)
def pointwise_job(a, fa, s0, s1):
    """Span [s0, s1) (rows or columns, slot PAXIS) of the pointwise job in slots `a`."""
    m, c, p = a[PM], a[PC], a[PP]
    w = nb.carray(f32_ptr(a[PW]), (m, c))
    x = nb.carray(f32_ptr(a[PX]), (c, p))
    y = nb.carray(f32_ptr(a[PY]), (m, p))
    has_b, has_z = a[PBIAS] != 0, a[PZ] != 0
    bias = nb.carray(f32_ptr(a[PBIAS]), (m,)) if has_b else _NO_B
    z = nb.carray(f32_ptr(a[PZ]), (m, p)) if has_z else _NO_Z
    nr = sgemm_packed.NR
    if a[PAXIS] == 1:
        m0, m1, j0, j1 = 0, m, s0, s1
    else:
        m0, m1, j0, j1 = s0, s1, 0, p
    cols = cols_for(m1 - m0, nr)
    pointwise_block_span(
        w, x, y, 0, bias, has_b, z, has_z, a[PACT], fa[0], fa[1], m0, m1, j0, j1, nr, cols
    )
