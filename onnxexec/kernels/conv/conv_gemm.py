"""The GEMM-job paths of kernels/conv/conv2d.py: the pointwise (1x1) product and the
im2row path (kernels/conv/conv_rows.py), each one sgemm per span run by the native pool
(native/parallel.py) without the GIL, with the bias / residual / activation
epilogue in the span. `Geo` / `Epi` describe a conv's geometry and its epilogue.
References: tests/unit/kernels/conv/test_conv2d.py, tests/unit/kernels/conv/test_conv_rows.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.conv import conv_rows, pointwise_packed
from onnxexec.kernels.conv.conv_direct import pointwise_direct, use_direct_pointwise
from onnxexec.kernels.conv.conv_taps import pointwise_span
from onnxexec.kernels.linalg import blas
from onnxexec.kernels.math.activations import epilogue, epilogue_jit
from onnxexec.native.launch import run_job
from onnxexec.native.parallel import (
    ARGS,
    KIND_GEMM,
    KIND_IM2ROW,
    KIND_PW,
    MAX_SPANS,
    native_pool,
    num_threads,
    parallel_for,
)

f32 = np.float32
_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1), dtype=np.float32)
PARALLEL_MACS = tuning.CONV_GEMM_PARALLEL_MACS


@dataclass(frozen=True)
class Geo:
    kh: int
    kw: int
    sh: int
    sw: int
    ph: int
    pw: int
    dh: int
    dw: int
    ow: int


@dataclass(frozen=True)
class Epi:
    """What happens to a finished output tile: + bias per channel (+ z), activation."""

    bias: np.ndarray | None
    act: int
    alpha: float
    beta: float
    z: np.ndarray | None

    def apply(self, y: np.ndarray, n0: int, n1: int, rows: slice = slice(None)) -> None:
        epilogue(
            y[rows],
            n0,
            n1,
            None if self.bias is None else self.bias[rows],
            self.act,
            self.alpha,
            self.beta,
            row_bias=True,
            z=None if self.z is None else self.z[rows],
        )


def pointwise(
    wm: np.ndarray,
    xm: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> None:
    """y (M, P) = act(wm (M, C) @ xm (C, P) + bias[:, None] + z), each thread's slab
    finished by the epilogue right after its product."""
    mg, p = y.shape
    has_b, has_z, has_epi = (
        bias is not None,
        z is not None,
        bias is not None or act or z is not None,
    )
    bb = _NO_BIAS if bias is None else bias
    zz = _NO_Z if z is None else z
    contiguous = wm.flags.c_contiguous and xm.flags.c_contiguous and y.flags.c_contiguous
    if contiguous and (z is None or z.flags.c_contiguous) and use_direct_pointwise(wm.shape[1], p):
        pointwise_direct(wm, xm, y, bias, z, act, alpha, beta)
        return
    if use_packed(wm.shape[1], mg, p) and _pointwise_packed(wm, xm, y, bias, z, act, alpha, beta):
        return
    fn = blas.SGEMM
    if fn and wm.flags.c_contiguous and xm.flags.c_contiguous and y.flags.c_contiguous:
        # one compiled call per span: sgemm + epilogue (see conv_taps.pointwise_span)
        def span(m0: int, m1: int, p0: int, p1: int) -> None:
            pointwise_span(
                fn, wm, xm, y, bb, has_b, zz, has_z, act, alpha, beta, m0, m1, p0, p1
            )  # fmt: skip
    else:

        def span(m0: int, m1: int, p0: int, p1: int) -> None:
            np.matmul(wm[m0:m1], xm[:, p0:p1], out=y[m0:m1, p0:p1])
            if has_epi:
                epilogue_jit(
                    y[m0:m1], p0, p1, bb[m0:m1] if has_b else bb, has_b, True,
                    zz[m0:m1] if has_z else zz, has_z, act, alpha, beta,
                )  # fmt: skip

    if num_threads() == 1 or mg * p * wm.shape[1] < PARALLEL_MACS:
        span(0, mg, 0, p)
    elif fn and _pointwise_native(fn, wm, xm, y, bias, z, act, alpha, beta):
        pass
    elif p >= mg:
        parallel_for(lambda a, b: span(0, mg, a * 64, min(b * 64, p)), -(-p // 64))
    else:
        parallel_for(lambda a, b: span(a, b, 0, p), mg, min_chunk=4)


PACKED_MIN_COLS = tuning.CONV_PACKED_MIN_COLS
_SMALL_P_MIN_COLS = tuning.CONV_PACKED_MIN_COLS_AVX512


def use_packed(c: int, m: int, p: int) -> bool:
    """Whether a 1x1 conv of c -> m channels over p pixels takes kernels/
    pointwise_packed.py: expanding layers (c <= m) with many pixels, where OpenBLAS's
    extra passes over the large output cost most (1-2 threads, measured on
    MobileNetV2's 16 -> 96 at 112 x 112, 24 -> 144 at 56 x 56, 32 -> 192 at 28 x 28:
    12-30% faster). Projections (c > m) read a wide X that the packing copies once
    more, and measured 0-15% slower.

    On AVX-512 hosts also the small products OpenBLAS runs below its best: every
    layer of 784 pixels and, under that, weights of up to 2^17 values (2^19 at 7x7).
    Measured in-model on an Intel AVX-512 VM, 2 threads: MobileNetV2's 14x14 / 7x7 /
    28x28 1x1 layers 5-27% faster than through OpenBLAS (all its 1x1 layers: 5.03 ->
    4.74 ms a run), ResNet-50's 28x28 ones 4-6%; ResNet-50's larger 14x14 / 7x7
    products (2^18+ weights) were 3-14% slower packed, so they stay with OpenBLAS."""
    if not pointwise_packed.AVAILABLE:
        return False
    if c <= m and p >= PACKED_MIN_COLS:
        return True
    if not pointwise_packed.AVX512:
        return False
    return p >= _SMALL_P_MIN_COLS or c * m <= (1 << 19 if p <= 64 else 1 << 17)


def _pointwise_packed(
    wm: np.ndarray,
    xm: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> bool:
    """pointwise() on kernels/conv/pointwise_packed.py: one call on this thread, or a
    native job split over output columns (many pixels) or rows (few pixels, where the
    32-column panels would not divide evenly). False when an operand isn't a plain
    C-contiguous float32 array."""
    mg, p = y.shape
    c = wm.shape[1]
    ok = wm.flags.c_contiguous and xm.flags.c_contiguous and y.flags.c_contiguous
    ok = ok and wm.dtype == xm.dtype == y.dtype == np.float32
    if z is not None:
        ok = ok and z.shape == y.shape and z.flags.c_contiguous and z.dtype == np.float32
    if not ok:
        return False
    has_b = bias is not None
    bias = _NO_BIAS if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    nr = pointwise_packed.NR
    threads = num_threads()
    pool = native_pool() if threads > 1 and mg * p * c >= PARALLEL_MACS else None
    if pool is None:
        pointwise_packed.pointwise_block_span(
            wm, xm, y, 0, bias, has_b, _NO_Z if z is None else z, z is not None, act,
            alpha, beta, 0, mg, 0, p, nr, pointwise_packed.block_cols(mg),
        )  # fmt: skip
        return True
    try:
        panels = -(-p // nr)
        if panels >= 4 * threads:
            axis, parts = 1, min(2 * threads, MAX_SPANS)
            cuts = [panels * i // parts * nr for i in range(parts)] + [p]
        else:
            axis, parts = 0, min(threads, MAX_SPANS)
            cuts = [mg * i // parts for i in range(parts)] + [mg]
        args = (
            wm.ctypes.data, xm.ctypes.data, y.ctypes.data,
            bias.ctypes.data if has_b else 0, 0 if z is None else z.ctypes.data,
            mg, c, p, act, axis,
        )  # fmt: skip
        cuts_a = np.array(cuts, dtype=np.int64)
        run_job(pool, KIND_PW, args, alpha, beta, cuts_a, keep=(wm, bias))
    finally:
        pool.busy.release()
    return True


def _pointwise_native(
    fn: int,
    wm: np.ndarray,
    xm: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> bool:
    """_pointwise's product as a GEMM job of the native pool (blas.gemm_span with a
    per-row bias and the residual): the workers run their spans without the GIL, where
    Python spans handed it back and forth and measured no faster on 2 threads than on
    one. False when the pool is busy or an operand isn't a plain C-contiguous array."""
    mg, p = y.shape
    c = wm.shape[1]
    ok = wm.flags.c_contiguous and xm.flags.c_contiguous and y.flags.c_contiguous
    if z is not None:
        ok = ok and z.shape == y.shape and z.flags.c_contiguous and z.dtype == np.float32
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
    pool = native_pool() if ok else None
    if pool is None:
        return False
    try:
        threads = num_threads()
        # split the longer side (columns in 64s, rows in 8s), one span per thread: each
        # span packs the other operand again, and two per thread measured 5-20% slower
        axis = 1 if p >= mg else 0
        units = -(-(p if axis else mg) // (64 if axis else 8))
        parts = min(units, threads, MAX_SPANS)
        step = 64 if axis else 8
        cuts = [units * i // parts * step for i in range(parts)]
        bounds = np.array([*cuts, p if axis else mg], dtype=np.int64)
        args = (
            fn,
            blas.NO_TRANS,
            mg,
            p,
            c,
            wm.ctypes.data,
            c,
            xm.ctypes.data,
            p,
            y.ctypes.data,
            p,
            0 if bias is None else bias.ctypes.data,
            act,
            axis,
            0,
            p,
            1,
            0 if z is None else z.ctypes.data,
        )
        run_job(pool, KIND_GEMM, args, alpha, beta, bounds, keep=(wm, bias))
    finally:
        pool.busy.release()
    return True


def rows_conv(
    xi: np.ndarray,
    c0: int,
    c1: int,
    wm: np.ndarray,
    y: np.ndarray,
    geo: Geo,
    oh: int,
    ep: Epi,
) -> None:
    """y (M, OH*OW) = epilogue(wm (M, KH*KW*Cg, OHWI order) @ im2row(xi[c0:c1])^T)
    (kernels/conv/conv_rows.py): an im2row job, then a GEMM job splitting the weight's rows
    one span per thread (four spans, each packing the whole im2row matrix again,
    measured 10-25% slower)."""
    kh, kw, ow = geo.kh, geo.kw, geo.ow
    mg, p = y.shape
    k = wm.shape[1]
    hp = max(xi.shape[1] + geo.ph, (oh - 1) * geo.sh + (kh - 1) * geo.dh + 1)
    wp = max(xi.shape[2] + geo.pw, (ow - 1) * geo.sw + (kw - 1) * geo.dw + 1)
    xp = np.empty((hp, wp, c1 - c0), dtype=f32)
    conv_rows.to_hwc(xi, c0, c1, geo.ph, geo.pw, xp)
    rows = np.empty((p, k), dtype=f32)
    threads = num_threads()
    parallel = threads > 1 and mg * k * p >= PARALLEL_MACS
    fa = np.array([ep.alpha, ep.beta, 0.0, 0.0])
    a = conv_rows.job_args(xp, (kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ow), rows)
    _run(parallel, KIND_IM2ROW, a, fa, _bounds(p, min(p, 2 * threads), 1, p))
    bias = None if ep.bias is None else np.ascontiguousarray(ep.bias, dtype=f32)
    g = np.array(
        [
            blas.SGEMM, blas.TRANS, mg, p, k, wm.ctypes.data, k, rows.ctypes.data, k,
            y.ctypes.data, p, 0 if bias is None else bias.ctypes.data, ep.act, 0, 0, p, 1,
            0 if ep.z is None else ep.z.ctypes.data,
        ],
        dtype=np.int64,
    )  # fmt: skip
    units = -(-mg // 16)
    _run(parallel, KIND_GEMM, g, fa, _bounds(units, min(units, threads), 16, mg))


def _run(parallel: bool, kind: int, a: np.ndarray, fa: np.ndarray, bounds: np.ndarray) -> None:
    """Native job `kind` with slots `a` over spans [bounds[i], bounds[i + 1]) on the pool,
    or on this thread when not `parallel` or the pool is busy."""
    pool = native_pool() if parallel else None
    if pool is None:
        span = conv_rows.im2row_span if kind == KIND_IM2ROW else blas.gemm_span
        span(a, fa, bounds[0], bounds[-1])
        return
    try:
        pool.ctrl[ARGS : ARGS + a.shape[0]] = a
        pool.fctrl[:] = fa
        pool.run_native(kind, bounds)
    finally:
        pool.busy.release()


def _bounds(units: int, parts: int, step: int, total: int) -> np.ndarray:
    """parts + 1 span edges over `units` units of `step` items, the last at `total`."""
    return np.array([*(units * i // parts * step for i in range(parts)), total], dtype=np.int64)
