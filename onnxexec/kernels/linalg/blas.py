"""numpy's own OpenBLAS sgemm, callable from numba code without the GIL.

numpy wheels ship OpenBLAS with 64-bit integers and prefixed symbols
(`scipy_cblas_sgemm64_`). Its address is looked up once with ctypes and passed to
numba kernels as a plain int64 (a ctypes function object inside a kernel would stop
numba from caching it); `sgemm` below casts it back and calls it. BLAS's thread
count is still set by threadpoolctl (runtime/threads.py): this is the same library.

`SGEMM` is 0 when the symbol is missing; callers then use np.matmul.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np
from llvmlite import ir  # IR builders only (pure Python): LLVM itself is not loaded

from onnxexec.kernels import objload as nb
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.math.activations import epilogue_jit
from onnxexec.kernels.objload import intrinsic, lazy_module

# used inside intrinsic definitions, which run only while numba compiles a kernel
types = lazy_module("numba.core.types")

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def _find_sgemm() -> int:
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so*"))):
        try:
            fn = ctypes.CDLL(path).scipy_cblas_sgemm64_
        except (OSError, AttributeError):
            continue
        return int(ctypes.cast(fn, ctypes.c_void_p).value or 0)
    return 0


SGEMM: int = _find_sgemm()

_I64 = ir.IntType(64)


@intrinsic
def sgemm(typingctx, fn, tb, m, n, k, a, lda, b, ldb, c, ldc, beta):
    """Row-major C[m, n] = A[m, k] @ op(B) + beta * C via the cblas function at address
    `fn`; tb is NO_TRANS or TRANS; a / b / c are addresses (int64)."""
    sig = types.void(*([types.int64] * 11), types.float32)

    def codegen(context, builder, signature, args):
        fn, tb, m, n, k, a, lda, b, ldb, c, ldc, beta = args
        i32, f32, ptr = ir.IntType(32), ir.FloatType(), ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(
            ir.VoidType(),
            [i32, i32, i32, _I64, _I64, _I64, f32, ptr, _I64, ptr, _I64, f32, ptr, _I64],
        )
        callee = builder.inttoptr(fn, fnty.as_pointer())
        builder.call(
            callee,
            [
                ir.Constant(i32, ROW_MAJOR),
                ir.Constant(i32, NO_TRANS),
                builder.trunc(tb, i32),
                m,
                n,
                k,
                ir.Constant(f32, 1.0),
                builder.inttoptr(a, ptr),
                lda,
                builder.inttoptr(b, ptr),
                ldb,
                beta,
                builder.inttoptr(c, ptr),
                ldc,
            ],
        )
        return context.get_dummy_value()

    return sig, codegen


# ----- the product span a pool thread runs ---------------------------------------
# Job arguments, as slots of an int64 array (floats in a float64 array beside it).
# The activation applies to output columns [ACT0, ACT1) only (a grouped product whose
# outputs differ in activation, e.g. Llama's gate and up projections). ROWB set: the
# bias is per output row (a 1x1 conv's channels), else per column; Z: the address of
# a residual added before the activation (M x LDC like OUT), or 0.
FN, TB, M, N, K, X, LDA, W, LDB, OUT, LDC, BIAS, ACT, AXIS, ACT0, ACT1, ROWB, Z = range(18)
G_ARGS = 18
_NO_Z = np.zeros((1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True)
def gemm_span(a, fa, i0, i1):
    """Columns (AXIS 1) or rows (AXIS 0) [i0, i1) of out = x @ op(w), then the bias /
    activation epilogue on that block. `a` holds the GEMM job's int64 slots (above),
    fa[0:2] the activation's alpha / beta."""
    fn, tb, m, n, k = a[FN], a[TB], a[M], a[N], a[K]
    x, lda, w, ldb, out, ldc = a[X], a[LDA], a[W], a[LDB], a[OUT], a[LDC]
    if a[AXIS] == 1:
        boff = i0 * ldb if tb == TRANS else i0
        sgemm(fn, tb, m, i1 - i0, k, x, lda, w + 4 * boff, ldb, out + 4 * i0, ldc, 0.0)
        r0, r1, c0, c1 = 0, m, i0, i1
    else:
        sgemm(fn, tb, i1 - i0, n, k, x + 4 * i0 * lda, lda, w, ldb, out + 4 * i0 * ldc, ldc, 0.0)
        r0, r1, c0, c1 = i0, i1, 0, n
    span_epilogue(a, fa, r0, r1, c0, c1)


@nb.njit(nogil=True, cache=True)
def span_epilogue(a, fa, r0, r1, c0, c1):
    """The GEMM job's bias / residual / activation on rows [r0, r1) x columns [c0, c1)
    of OUT."""
    m, n, out, ldc = a[M], a[N], a[OUT], a[LDC]
    has_bias, has_z, row_b = a[BIAS] != 0, a[Z] != 0, a[ROWB] != 0
    if not has_bias and not has_z and a[ACT] == Activation.NONE:
        return
    y = nb.carray(f32_ptr(out), (m, ldc))[r0:r1]
    bias = _NO_Z[0]
    if has_bias:
        bias = nb.carray(f32_ptr(a[BIAS]), (m if row_b else n,))
        if row_b:
            bias = bias[r0:r1]
    z = nb.carray(f32_ptr(a[Z]), (m, ldc))[r0:r1] if has_z else _NO_Z
    # columns [c0, c1) = bias only | bias + activation | bias only
    lo, hi = max(c0, min(a[ACT0], c1)), max(c0, min(a[ACT1], c1))
    for s0, s1, code in ((c0, lo, 0), (lo, hi, a[ACT]), (hi, c1, 0)):  # 0: Activation.NONE
        if s1 > s0 and (has_bias or has_z or code != Activation.NONE):
            epilogue_jit(y, s0, s1, bias, has_bias, row_b, z, has_z, code, fa[0], fa[1])
