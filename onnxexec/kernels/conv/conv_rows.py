"""KxK and strided 1x1 float32 convolution as one GEMM against an "im2row" matrix.

The input (one image, one group's channels) is first copied to a zero-padded HWC
array xp (Hp, Wp, Cg). With the weight stored OHWI (M, KH, KW, Cg) its K index runs
(a, b, c), and for output pixel (i, j) the matching K-vector is, for each kernel row
a, the run xp[i*sh + a*dh, j*sw : j*sw + KW, :] -- one contiguous copy of KW * Cg
floats when the dilation is 1 (else KW copies of Cg). So the im2row matrix
R (P, K), P = OH * OW, is built from P * KH memcpys, where kernels/conv/im2col_job.py's
gathering im2col copies rows of OW (7 for ResNet's last stage, ~37 ns each), and
Y (M, P) = W (M, K) @ R^T is one sgemm with B transposed.

The path is for few pixels and many channels (P < M: ResNet-50's 14x14 and 7x7
stages), where splitting the output pixels would make every thread pack the whole
weight: R is built by a native job of the pool (native/parallel.py, KIND_IM2ROW,
spans of pixels), then a GEMM job (blas.gemm_span, B transposed, with the bias /
residual / activation epilogue) splits the rows of W (kernels/conv/conv2d.py).
References: tests/unit/kernels/conv/test_conv_rows.py (float64 numpy conv).
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels import tuning
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.linalg import blas

f32 = np.float32
U = np.uint64
_NO_Z = np.zeros((1, 1), dtype=np.float32)
_MIN_CG = tuning.CONV_ROWS_MIN_CG  # input channels per group below which the copies are too short


@nb.njit(nogil=True, cache=True, error_model="numpy")
def to_hwc(x, c0, c1, ph, pw, xp):
    """xp[r + ph, t + pw, c - c0] = x[c, r, t] for x (C, H, W); the border of xp
    (Hp, Wp, c1 - c0) is zeroed here, the interior written once."""
    height, width = x.shape[1], x.shape[2]
    hp, wp, cg = xp.shape
    flat = xp.reshape(-1)
    for r in range(hp):
        if r < ph or r >= ph + height:
            flat[r * wp * cg : (r + 1) * wp * cg] = f32(0.0)
            continue
        row = flat[r * wp * cg : (r + 1) * wp * cg]
        row[: pw * cg] = f32(0.0)
        row[(pw + width) * cg :] = f32(0.0)
        # channel blocks of 16: each source row is read sequentially, and the block's
        # writes (16 floats per pixel) stay within a few cache lines per pixel
        for cb in range(c0, c1, 16):
            ce = min(cb + 16, c1)
            for c in range(cb, ce):
                src = x[c, r - ph]
                dst = row[pw * cg + (c - c0) :]
                for t in range(width):
                    dst[U(t) * U(cg)] = src[t]


@nb.njit(nogil=True, cache=True, error_model="numpy")
def im2row(xp, kh, kw, sh, sw, dh, dw, ow, p0, p1, rows):
    """rows[p - p0, (a * KW + b) * Cg + c] = xp[i*sh + a*dh, j*sw + b*dw, c] for output
    pixels p in [p0, p1), (i, j) = divmod(p, OW); xp (Hp, Wp, Cg) padded HWC."""
    wp, cg = xp.shape[1], xp.shape[2]
    flat = xp.reshape(-1)
    seg = kw * cg
    for p in range(p0, p1):
        i, j = p // ow, p % ow
        dst = rows[p - p0]
        for a in range(kh):
            r = i * sh + a * dh
            if dw == 1:
                s = (r * wp + j * sw) * cg
                dst[a * seg : (a + 1) * seg] = flat[s : s + seg]
            else:
                for b in range(kw):
                    s = (r * wp + j * sw + b * dw) * cg
                    d = (a * kw + b) * cg
                    dst[d : d + cg] = flat[s : s + cg]


# ----- the span a pool thread runs ---------------------------------------------------
# Job arguments (slots of the pool's int64 array): xp (Hp, Wp, Cg) padded HWC, the
# geometry, and R (P, K) with K = KH * KW * Cg, addresses of C-contiguous float32.
# Spans are ranges of output pixels.
RXP, RHP, RWP, RCG, RKH, RKW, RSH, RSW, RDH, RDW, ROW, RP, RROWS = range(13)
ROW_ARGS = 13


@nb.njit(nogil=True, cache=True)
def im2row_span(a, fa, p0, p1):
    """R rows of output pixels [p0, p1) for the job in slots `a` (fa unused)."""
    kh, kw, cg = a[RKH], a[RKW], a[RCG]
    xp = nb.carray(f32_ptr(a[RXP]), (a[RHP], a[RWP], cg))
    rows = nb.carray(f32_ptr(a[RROWS]), (a[RP], kh * kw * cg))
    im2row(xp, kh, kw, a[RSH], a[RSW], a[RDH], a[RDW], a[ROW], p0, p1, rows[p0:p1])


def job_args(
    xp: np.ndarray, geo: tuple[int, int, int, int, int, int, int], rows: np.ndarray
) -> np.ndarray:
    """The job's int64 slots (above); geo = (KH, KW, sh, sw, dh, dw, OW)."""
    kh, kw, sh, sw, dh, dw, ow = geo
    return np.array(
        [xp.ctypes.data, *xp.shape, kh, kw, sh, sw, dh, dw, ow, rows.shape[0], rows.ctypes.data],
        dtype=np.int64,
    )


def use_rows(cg: int, mg: int, p: int, kh: int, kw: int) -> bool:
    """Whether a KxK conv (Cg input and mg output channels per group, P output pixels)
    takes this path: fewer pixels than channels (ResNet-50's 14x14 and 7x7 stages ran
    1.2-3x faster than the tap GEMMs or the gathering im2col on 2 threads), and enough
    input channels that each copy is a long run."""
    return bool(blas.SGEMM) and kh * kw > 1 and p < mg and cg >= _MIN_CG
