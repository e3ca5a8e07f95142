"""The q.k score of one-token attention (ggml_vec_dot_f16's order) as 8-wide vector code.

ggml_vec_dot_f16 (ggml-cpu/vec.cpp, AVX path of simd-mappings.h: GGML_F16_STEP = 32,
GGML_F16_EPR = 8, so GGML_F16_ARR = 4 accumulators of 8 floats) sums element d of
the first d32 = Dh & ~31 into accumulator (d >> 3) & 3, lane d & 7, in increasing d,
then reduces: acc0 + acc2, acc1 + acc3, their sum (lane-wise), then the 8 lanes as
((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)). The leftovers d >= d32 are the
caller's (summed in double). The terms are a mul then an add, as our scalar
reference (llm_fused's portable loop, checked against attention._attend_ggml) does:
each lane of a <8 x float> fmul + fadd is the same IEEE operation as the scalar one,
so both give the same bits.

numba has no vector types, so `qk32` is emitted as LLVM IR by an `@intrinsic` (as
ggml_simd does); `QK32` is that kernel when the host has AVX2 and numba's JIT is on,
else the portable scalar loop `qk32_portable`.
"""

from __future__ import annotations

from typing import Any, Final

import llvmlite.binding as llb
import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

_FEATURES = llb.get_host_cpu_features()
AVAILABLE: Final = not nb.config.DISABLE_JIT and all(
    _FEATURES.get(f, False) for f in ("avx", "avx2")
)

_I32, _I64 = ir.IntType(32), ir.IntType(64)
_F32 = ir.FloatType()
_V8F32 = ir.VectorType(_F32, 8)


def _vload(builder: ir.IRBuilder, base: Any, off: Any) -> Any:
    """<8 x float> at float index `off` of the float pointer `base` (unaligned)."""
    p = builder.bitcast(builder.gep(base, [off]), _V8F32.as_pointer())
    return builder.load(p, align=4)


@intrinsic
def _qk32_ir(typingctx, k, ko, q, d32):
    """float32: the ggml_vec_dot_f16 sum (module docstring) of k.flat[ko:ko + d32] and
    q[:d32] (both float32, C-contiguous), d32 a multiple of 32 (0 gives 0.0)."""
    sig = types.float32(k, types.intp, q, types.intp)

    def codegen(context, builder, signature, args):
        kt, _, qt, _ = signature.args
        k_, ko_, q_, d32_ = args
        kp = context.make_array(kt)(context, builder, k_).data
        qp = context.make_array(qt)(context, builder, q_).data
        zero8 = ir.Constant(_V8F32, [0.0] * 8)
        accs = [cgutils.alloca_once_value(builder, zero8) for _ in range(4)]
        n = builder.ashr(d32_, _I64(5))
        with cgutils.for_range(builder, n) as loop:
            d0 = builder.mul(loop.index, _I64(32))
            for r in range(4):
                d = builder.add(d0, _I64(8 * r))
                kv = _vload(builder, kp, builder.add(ko_, d))
                qv = _vload(builder, qp, d)
                builder.store(builder.fadd(builder.load(accs[r]), builder.fmul(kv, qv)), accs[r])
        a = [builder.load(x) for x in accs]
        v = builder.fadd(builder.fadd(a[0], a[2]), builder.fadd(a[1], a[3]))
        e = [builder.extract_element(v, _I32(i)) for i in range(8)]
        t = [builder.fadd(e[i], e[i + 4]) for i in range(4)]
        return builder.fadd(builder.fadd(t[0], t[1]), builder.fadd(t[2], t[3]))

    return sig, codegen


@nb.njit(cache=True, nogil=True, inline="always")
def _lane(kj, qv, ln, d32):
    """Lane ln of the first reduction step over accumulator cells (ln, ln + 8, ln + 16,
    ln + 24), each summing d = cell, cell + 32, ... in order."""
    a0 = np.float32(0.0) + kj[ln] * qv[ln]
    a1 = np.float32(0.0) + kj[ln + 8] * qv[ln + 8]
    a2 = np.float32(0.0) + kj[ln + 16] * qv[ln + 16]
    a3 = np.float32(0.0) + kj[ln + 24] * qv[ln + 24]
    for d0 in range(32, d32, 32):
        a0 += kj[d0 + ln] * qv[d0 + ln]
        a1 += kj[d0 + ln + 8] * qv[d0 + ln + 8]
        a2 += kj[d0 + ln + 16] * qv[d0 + ln + 16]
        a3 += kj[d0 + ln + 24] * qv[d0 + ln + 24]
    return np.float32(np.float32(a0 + a2) + np.float32(a1 + a3))


@nb.njit(cache=True, nogil=True, inline="always")
def qk32_portable(kc, j, hk, qv, d32):
    """The ggml_vec_dot_f16 sum of kc[j, hk, :d32] and qv[:d32] (kc (C, Hkv, Dh)),
    scalar code: the lanes one by one (2.5x faster in numba than a loop over the 32
    accumulator cells, same sums)."""
    if d32 == 0:
        return np.float32(0.0)
    kj = kc[j, hk]
    t0 = np.float32(_lane(kj, qv, 0, d32) + _lane(kj, qv, 4, d32))
    t1 = np.float32(_lane(kj, qv, 1, d32) + _lane(kj, qv, 5, d32))
    t2 = np.float32(_lane(kj, qv, 2, d32) + _lane(kj, qv, 6, d32))
    t3 = np.float32(_lane(kj, qv, 3, d32) + _lane(kj, qv, 7, d32))
    return np.float32(np.float32(t0 + t1) + np.float32(t2 + t3))


@nb.njit(cache=True, nogil=True, inline="always")
def qk32_simd(kc, j, hk, qv, d32):
    """qk32_portable as <8 x float> code (kc C-contiguous)."""
    _, Hkv, Dh = kc.shape
    return _qk32_ir(kc, (j * Hkv + hk) * Dh, qv, d32)


QK32: Final = qk32_simd if AVAILABLE else qk32_portable
"""The q.k kernel the attention loop calls (qk32_portable's signature)."""
