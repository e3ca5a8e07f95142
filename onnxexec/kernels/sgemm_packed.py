"""float32 GEMM against a weight packed once, for the short products of transformer
layers (64..200 rows): AVX2 / FMA micro-kernels emitted as LLVM IR.

OpenBLAS's sgemm repacks both operands on every call; with 64 rows the weight's
repacking costs about as much as a quarter of the multiply-adds it feeds (each
packed weight value is used only M times). onnxruntime's MLAS packs constant
weights once, at session creation; so does this module:

    packed (P, K, 16) float32, P = ceil(N / 16): packed[p, k, j] = W[k, 16 p + j]

(zero past column N). A micro-kernel computes a tile of up to 6 rows x 16 columns,
C[i0:i0+R, 16p:16p+16] = A[i0:i0+R, :] @ packed[p], with 12 accumulator registers:
per k, two 8-wide weight loads, R broadcasts of A[i, k] and 2R fused multiply-adds.
A is read in place (row-major, any row stride). The span kernel walks panels
outermost, so one panel (K x 64 bytes) stays in L2 while every row block reads it.

Each output element is one dot product summed in k order with fused multiply-adds
(BLAS kernels also use FMA, in blocks of k): results match np.matmul to float32
rounding, not bit for bit. AVAILABLE is False without AVX2 / FMA (or with numba's
JIT disabled); callers then use BLAS.
"""

from __future__ import annotations

from typing import Any, Final

import llvmlite.binding as llb
import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from onnxexec.kernels import blas
from onnxexec.kernels.blas import f32_ptr

_FEATURES = llb.get_host_cpu_features()
AVAILABLE: Final = not nb.config.DISABLE_JIT and all(
    _FEATURES.get(f, False) for f in ("avx2", "fma")
)
NR: Final = 16  # columns per panel (two AVX registers)
MR: Final = 6  # rows per micro-kernel call (12 accumulators + 2 weight registers)

_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_V8F32 = ir.VectorType(_F32, 8)
_V8I32 = ir.VectorType(ir.IntType(32), 8)


def pack(w: np.ndarray) -> np.ndarray:
    """W (K, N) -> (ceil(N/16), K, 16) float32, zero-padded columns, C-contiguous.

    numpy, not numba: it runs at session creation, before any kernel has been
    dispatched (numba's first dispatch in a process costs over a second)."""
    k, n = w.shape
    p = -(-n // NR)
    full = n // NR
    out = np.empty((p, k, NR), dtype=np.float32)
    if full:
        out[:full] = w[:, : full * NR].reshape(k, full, NR).transpose(1, 0, 2)
    if n % NR:
        out[full] = 0.0
        out[full, :, : n % NR] = w[:, full * NR :]
    return out


def unpack(wp: np.ndarray, n: int) -> np.ndarray:
    """The (K, n) weight a packed (P, K, 16) array holds (a copy)."""
    p, k, _ = wp.shape
    return np.ascontiguousarray(wp.transpose(1, 0, 2).reshape(k, p * NR)[:, :n])


def _make_kernel(rows: int, accumulate: bool) -> Any:
    """kern(a, lda, b, k, c, ldc): C[r, 0:16] (+)= sum_k A[r, k] * B[k, 0:16] for r <
    rows (+= when `accumulate`), addresses as int64 (A rows lda floats apart, B a packed
    panel block, k rows of 16, C rows ldc apart)."""

    @intrinsic
    def kern(typingctx, a, lda, b, k, c, ldc):
        sig = types.void(*([types.int64] * 6))

        def codegen(context, builder, signature, args):
            a_, lda_, b_, k_, c_, ldc_ = args
            fptr = _F32.as_pointer()
            ap, bp, cp = (builder.inttoptr(v, fptr) for v in (a_, b_, c_))
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(_V8F32, [_V8F32] * 3), "llvm.fma.v8f32"
            )
            zero = ir.Constant(_V8F32, [0.0] * 8)
            crows = [builder.gep(cp, [builder.mul(ldc_, _I64(r))]) for r in range(rows)]
            init = [
                [
                    builder.load(
                        builder.bitcast(builder.gep(crows[r], [_I64(8 * j)]), _V8F32.as_pointer()),
                        align=4,
                    )
                    if accumulate
                    else zero
                    for j in range(2)
                ]
                for r in range(rows)
            ]
            undef = ir.Constant(_V8F32, ir.Undefined)
            splat_mask = ir.Constant(_V8I32, [0] * 8)
            rows_a = [builder.gep(ap, [builder.mul(lda_, _I64(r))]) for r in range(rows)]
            pre = builder.block
            loop = builder.append_basic_block("pk_loop")
            done = builder.append_basic_block("pk_done")
            builder.cbranch(builder.icmp_signed(">", k_, _I64(0)), loop, done)

            builder.position_at_end(loop)
            kk = builder.phi(_I64)
            acc = [[builder.phi(_V8F32) for _ in range(2)] for _ in range(rows)]
            boff = builder.mul(kk, _I64(NR))
            bv = [
                builder.load(
                    builder.bitcast(
                        builder.gep(bp, [builder.add(boff, _I64(8 * j))]), _V8F32.as_pointer()
                    ),
                    align=4,
                )
                for j in range(2)
            ]
            new = []
            for r in range(rows):
                s = builder.load(builder.gep(rows_a[r], [kk]), align=4)
                v = builder.insert_element(undef, s, ir.Constant(ir.IntType(32), 0))
                v = builder.shuffle_vector(v, undef, splat_mask)
                new.append([builder.call(fma, [v, bv[j], acc[r][j]]) for j in range(2)])
            kn = builder.add(kk, _I64(1))
            end = builder.block
            kk.add_incoming(_I64(0), pre)
            kk.add_incoming(kn, end)
            for r in range(rows):
                for j in range(2):
                    acc[r][j].add_incoming(init[r][j], pre)
                    acc[r][j].add_incoming(new[r][j], end)
            builder.cbranch(builder.icmp_signed("<", kn, k_), loop, done)

            builder.position_at_end(done)
            res = [[builder.phi(_V8F32) for _ in range(2)] for _ in range(rows)]
            for r in range(rows):
                for j in range(2):
                    res[r][j].add_incoming(init[r][j], pre)
                    res[r][j].add_incoming(new[r][j], end)
                    dst = builder.bitcast(builder.gep(crows[r], [_I64(8 * j)]), _V8F32.as_pointer())
                    builder.store(res[r][j], dst, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return kern


_K1, _K2, _K3, _K4, _K5, _K6 = (_make_kernel(r, False) for r in range(1, MR + 1))
_A1, _A2, _A3, _A4, _A5, _A6 = (_make_kernel(r, True) for r in range(1, MR + 1))
MC: Final = 144  # rows per block: its (MC, KC) slice of A stays in L2
KC: Final = 768  # depth per block: a (KC, 16) panel block (48 KB) stays in L2


@nb.njit(nogil=True, cache=True, inline="always")
def _tile(r, acc, a, lda, b, k, c, ldc):
    if acc:
        if r == 6:
            _A6(a, lda, b, k, c, ldc)
        elif r == 5:
            _A5(a, lda, b, k, c, ldc)
        elif r == 4:
            _A4(a, lda, b, k, c, ldc)
        elif r == 3:
            _A3(a, lda, b, k, c, ldc)
        elif r == 2:
            _A2(a, lda, b, k, c, ldc)
        else:
            _A1(a, lda, b, k, c, ldc)
    elif r == 6:
        _K6(a, lda, b, k, c, ldc)
    elif r == 5:
        _K5(a, lda, b, k, c, ldc)
    elif r == 4:
        _K4(a, lda, b, k, c, ldc)
    elif r == 3:
        _K3(a, lda, b, k, c, ldc)
    elif r == 2:
        _K2(a, lda, b, k, c, ldc)
    else:
        _K1(a, lda, b, k, c, ldc)


@nb.njit(nogil=True, cache=True)
def packed_span(a, lda, m, k, b, n, c, ldc, p0, p1):
    """C[:, 16 p0 : min(16 p1, n)] = A (m, k) @ W for panels [p0, p1) of the packed W at
    address b; a / c addresses of row-major float32 matrices (lda / ldc floats).
    Blocked MC rows x KC depth; a partial last panel goes through a scratch tile."""
    q1 = min(p1, n // NR)  # full panels end here
    for i_c in range(0, m, MC):
        i_e = min(i_c + MC, m)
        for k0 in range(0, k, KC):
            kc = min(KC, k - k0)
            for p in range(p0, q1):
                bp = b + 4 * (p * k + k0) * NR
                for i0 in range(i_c, i_e, MR):
                    _tile(
                        min(MR, i_e - i0),
                        k0 > 0,
                        a + 4 * (i0 * lda + k0),
                        lda,
                        bp,
                        kc,
                        c + 4 * (i0 * ldc + p * NR),
                        ldc,
                    )
    if q1 < p1:
        tmp = np.empty((MR, NR), dtype=np.float32)
        cm = nb.carray(f32_ptr(c), (m, ldc))
        c0 = q1 * NR
        w = n - c0
        for i0 in range(0, m, MR):
            r = min(MR, m - i0)
            _tile(r, False, a + 4 * i0 * lda, lda, b + 4 * q1 * k * NR, k, tmp.ctypes.data, NR)
            for i in range(r):
                for j in range(w):
                    cm[i0 + i, c0 + j] = tmp[i, j]


@nb.njit(nogil=True, cache=True)
def packed_job(a, fa, p0, p1):
    """Panels [p0, p1) of a GEMM job (blas's slots; W = the packed weight's address),
    then its bias / activation epilogue on those columns."""
    m, n, k = a[blas.M], a[blas.N], a[blas.K]
    packed_span(a[blas.X], a[blas.LDA], m, k, a[blas.W], n, a[blas.OUT], a[blas.LDC], p0, p1)
    blas.span_epilogue(a, fa, 0, m, p0 * NR, min(p1 * NR, n))
