"""The integer GEMM's AVX2 tiles (kernels/linalg/igemm.py's packed layout and tile
loop arguments), for CPUs without AVX-512 VNNI or under ONNXEXEC_ISA=avx2.

vpmaddubsw (u8 x s8 pairs into int16) would be one instruction per 32 products but
its int16 pair sums saturate (2 * 255 * -128 < -32768), so the bytes are widened to
int16 first and multiplied by vpmaddwd, which is exact for these ranges; this is the
shape of onnxruntime's MLAS AVX2 U8S8 kernel without its saturating fast path.
"""

from __future__ import annotations

from typing import Any, Final

import numba as nb
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

PANEL: Final = 16  # columns per packed panel (igemm.PANEL)
MR2: Final = 3  # A rows per tile: 12 ymm accumulators + 4 widened weight chunks

_I8, _I16, _I32, _I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_V8I32, _V16I16 = ir.VectorType(_I32, 8), ir.VectorType(_I16, 16)


def _make_avx2_tile(rows: int) -> Any:
    """An intrinsic tile(a, ao, lda, wp, wo, k4s, c, co, ldc) like `_make_tile`'s for
    ONE panel (16 columns) with AVX2: per k / 4 step the panel's 64 bytes are four
    chunks of 4 columns x 4 k, each sign-extended to 16 int16 (vpmovsxbw); A's four
    bytes are zero-extended and repeated to 16 int16; vpmaddwd (Intel SDM PMADDWD:
    adjacent int16 products summed into int32, saturating only for -32768 * -32768,
    which u8 x s8 never reach) leaves per column two int32 partial sums (k 0-1 and
    k 2-3), added pairwise once after the K loop."""

    @intrinsic
    def tile(typingctx, a, ao, lda, wp, wo, k4s, c, co, ldc):
        ip = types.intp
        sig = types.void(a, ip, ip, wp, ip, ip, c, ip, ip)

        def codegen(context, builder, signature, args):
            at, _, _, wt, _, _, ct, _, _ = signature.args
            a_, ao_, lda_, w_, wo_, k4s_, c_, co_, ldc_ = args

            def data(aty: Any, v: Any) -> Any:
                return context.make_array(aty)(context, builder, v).data

            ap, wpp, cp = data(at, a_), data(wt, w_), data(ct, c_)
            md = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(_V8I32, [_V16I16] * 2),
                "llvm.x86.avx2.pmadd.wd",
            )
            v16i8, v4i8 = ir.VectorType(_I8, 16), ir.VectorType(_I8, 4)
            zero = ir.Constant(_V8I32, [0] * 8)
            accs = [
                [cgutils.alloca_once_value(builder, zero) for _ in range(4)] for _ in range(rows)
            ]
            rep = ir.Constant(ir.VectorType(_I32, 16), [i % 4 for i in range(16)])
            with cgutils.for_range(builder, k4s_) as loop:
                k4 = loop.index
                wv = []
                for g in range(4):
                    off = builder.add(builder.add(wo_, builder.mul(k4, _I64(64))), _I64(16 * g))
                    ptr = builder.bitcast(builder.gep(wpp, [off]), v16i8.as_pointer())
                    wv.append(builder.sext(builder.load(ptr, align=1), _V16I16))
                for r in range(rows):
                    off = builder.add(
                        builder.add(ao_, builder.mul(lda_, _I64(r))), builder.mul(k4, _I64(4))
                    )
                    ptr = builder.bitcast(builder.gep(ap, [off]), v4i8.as_pointer())
                    four = builder.zext(builder.load(ptr, align=1), ir.VectorType(_I16, 4))
                    a16 = builder.shuffle_vector(four, four, rep)
                    for g in range(4):
                        acc = builder.add(builder.load(accs[r][g]), builder.call(md, [a16, wv[g]]))
                        builder.store(acc, accs[r][g])
            ev = ir.Constant(_V8I32, list(range(0, 16, 2)))
            od = ir.Constant(_V8I32, list(range(1, 16, 2)))
            for r in range(rows):
                for h in range(2):  # columns 8h .. 8h + 7 from chunks 2h and 2h + 1
                    lo_, hi_ = builder.load(accs[r][2 * h]), builder.load(accs[r][2 * h + 1])
                    s = builder.add(
                        builder.shuffle_vector(lo_, hi_, ev), builder.shuffle_vector(lo_, hi_, od)
                    )
                    off = builder.add(builder.add(co_, builder.mul(ldc_, _I64(r))), _I64(8 * h))
                    ptr = builder.bitcast(builder.gep(cp, [off]), _V8I32.as_pointer())
                    builder.store(s, ptr, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return tile


_avx2_1, _avx2_2, _avx2_3 = (_make_avx2_tile(r) for r in range(1, MR2 + 1))


@nb.njit(cache=True, nogil=True)
def tiles_avx2(a, lda, m, k4s, wp, c, ldc, t0, t1):  # pragma: no cover - numba
    """igemm's `_tiles_vnni` on the AVX2 tiles, one 16-column panel at a time."""
    for p in range(2 * t0, 2 * t1):
        wo = p * k4s * 64
        r = 0
        while r < m:
            n = min(MR2, m - r)
            ao = r * lda
            co = r * ldc + p * PANEL
            if n == 3:
                _avx2_3(a, ao, lda, wp, wo, k4s, c, co, ldc)
            elif n == 2:
                _avx2_2(a, ao, lda, wp, wo, k4s, c, co, ldc)
            else:
                _avx2_1(a, ao, lda, wp, wo, k4s, c, co, ldc)
            r += n
