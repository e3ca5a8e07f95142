"""The two dot products of one-token attention (ggml_vec_dot_f16's order) as 8-wide
vector code.

ggml_vec_dot_f16 (ggml-cpu/vec.cpp, AVX path of simd-mappings.h: GGML_F16_STEP = 32,
GGML_F16_EPR = 8, so GGML_F16_ARR = 4 accumulators of 8 floats) sums element d of
the first d32 = Dh & ~31 into accumulator (d >> 3) & 3, lane d & 7, in increasing d,
then reduces: acc0 + acc2, acc1 + acc3, their sum (lane-wise), then the 8 lanes as
((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)). The leftovers d >= d32 are the
caller's (summed in double). The terms are a mul then an add, as our scalar
reference (the portable loops, checked against attention._attend_ggml) does: each
lane of a <8 x float> fmul + fadd is the same IEEE operation as the scalar one. The
attention kernels (QK_HEADS: q.k over the key rows; WV32: the 32 accumulator slots of
the weights times values over the cells) fuse the mul into the add: their operands
are halves, whose products are exact in float32, so fma gives the same bits.

numba has no vector types, so the kernels are emitted as LLVM IR by `@intrinsic`s
(as ggml_simd does); QK32 / QK_HEADS / WV32 are those when the host has AVX2 + FMA and
numba's JIT is on, else the portable scalar loops (`*_portable`).
"""

from __future__ import annotations

from typing import Any, Final

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from onnxexec.kernels.isa import has

AVAILABLE: Final = not nb.config.DISABLE_JIT and has("avx", "avx2", "fma")

_I32, _I64 = ir.IntType(32), ir.IntType(64)
_F32 = ir.FloatType()
_V8F32 = ir.VectorType(_F32, 8)
_ZEROS8 = ir.Constant(ir.VectorType(_I32, 8), [0] * 8)  # shuffle mask: broadcast lane 0


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


def _vfma(builder: ir.IRBuilder, a: Any, b: Any, c: Any) -> Any:
    """a * b + c on <8 x float>, one rounding (llvm.fma.v8f32: vfmadd on FMA hosts)."""
    fnty = ir.FunctionType(_V8F32, [_V8F32] * 3)
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.fma.v8f32")
    return builder.call(fn, [a, b, c])


def _count_from(builder: ir.IRBuilder, first: Any, end: Any, step: int) -> Any:
    """How many of first, first + step, ... are < end (0 if first >= end)."""
    n = builder.sdiv(builder.add(builder.sub(end, first), _I64(step - 1)), _I64(step))
    return builder.select(builder.icmp_signed(">", end, first), n, _I64(0))


def _shuffle(builder: ir.IRBuilder, a: Any, b: Any, mask: list[int]) -> Any:
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, 8), mask))


def _reduce8(builder: ir.IRBuilder, v: list[Any]) -> Any:
    """<8 x float> [s_0, ..., s_7] of 8 vectors, s_i = ((l0 + l4) + (l1 + l5)) + ((l2 +
    l6) + (l3 + l7)) over the lanes l of v[i], the final sums of ggml_vec_dot_f16, with
    the adds of 8 reductions done together (each add is the scalar one: a + b = b + a)."""
    lo, hi = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]
    even, odd = [0, 2, 8, 10, 4, 6, 12, 14], [1, 3, 9, 11, 5, 7, 13, 15]

    def step(x: Any, y: Any, m0: list[int], m1: list[int]) -> Any:
        return builder.fadd(_shuffle(builder, x, y, m0), _shuffle(builder, x, y, m1))

    t = [step(v[i], v[i + 1], lo, hi) for i in range(0, 8, 2)]  # [t of v_i | t of v_i+1]
    u = [step(t[0], t[1], even, odd), step(t[2], t[3], even, odd)]
    r = step(u[0], u[1], even, odd)  # [s0, s2, s4, s6 | s1, s3, s5, s7]
    return _shuffle(builder, r, r, [0, 4, 1, 5, 2, 6, 3, 7])


_AHEAD: Final = 16  # key rows between a row's prefetch and its use (cold caches)


def _prefetch_row(builder: ir.IRBuilder, base: Any, off: Any, n: Any) -> None:
    """Prefetch the cache lines of floats base[off:off + n] into L1 (llvm.prefetch)."""
    i8p = ir.IntType(8).as_pointer()
    pf = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [i8p, _I32, _I32, _I32]), "llvm.prefetch.p0"
    )
    with cgutils.for_range(builder, builder.ashr(builder.add(n, _I64(15)), _I64(4))) as line:
        ptr = builder.gep(base, [builder.add(off, builder.mul(line.index, _I64(16)))])
        builder.call(pf, [builder.bitcast(ptr, i8p), _I32(0), _I32(3), _I32(1)])


@intrinsic
def _qk8_ir(typingctx, k, ko, kstride, j0, jmax, nblk, q, qo, qstride, ng, d32, s, so, sstride,
            v, dh):  # fmt: skip
    """Scores of ng query heads against key rows j = j0 .. j0 + 8 * nblk - 1 (rows past
    jmax read row jmax): s.flat[so + g * sstride + j - j0] = the ggml_vec_dot_f16 sum
    (module docstring) of k.flat[ko + j * kstride:][:d32] and q.flat[qo + g *
    qstride:][:d32]; all float32 C-contiguous, d32 a multiple of 32. Per block of 8
    rows (L1-resident for all heads) the 8 final reductions share their vector adds.
    Products are fused into the adds, which gives the mul-then-add bits only because
    k and q hold halves (the product of two halves is exact in float32). The caches
    are cold in a decode step (weights streamed through since), so each block
    prefetches the key rows _AHEAD rows on and its own rows of v (same layout as k,
    v.flat[ko + j * kstride:][:dh]) for the weighted sum that follows."""
    ip = types.intp
    sig = types.void(k, ip, ip, ip, ip, ip, q, ip, ip, ip, ip, s, ip, ip, v, ip)

    def codegen(context, builder, signature, args):
        kt, qt, st, vt = (signature.args[i] for i in (0, 6, 11, 14))
        k_, ko_, ks_, j0_, jmax_, nblk_, q_, qo_, qs_, ng_, d32_, s_, so_, ss_, v_, dh_ = args
        kp = context.make_array(kt)(context, builder, k_).data
        qp = context.make_array(qt)(context, builder, q_).data
        sp = context.make_array(st)(context, builder, s_).data
        vp = context.make_array(vt)(context, builder, v_).data
        zero8 = ir.Constant(_V8F32, [0.0] * 8)
        accs = [cgutils.alloca_once(builder, _V8F32) for _ in range(4)]
        n = builder.ashr(d32_, _I64(5))
        with cgutils.for_range(builder, nblk_) as blk:
            jb = builder.add(j0_, builder.mul(blk.index, _I64(8)))
            for i in range(8):
                j = builder.add(jb, _I64(i))
                ja = builder.add(j, _I64(_AHEAD))
                ja = builder.select(builder.icmp_signed(">", ja, jmax_), jmax_, ja)
                _prefetch_row(builder, kp, builder.add(ko_, builder.mul(ja, ks_)), dh_)
                j = builder.select(builder.icmp_signed(">", j, jmax_), jmax_, j)
                _prefetch_row(builder, vp, builder.add(ko_, builder.mul(j, ks_)), dh_)
            with cgutils.for_range(builder, ng_) as head:
                qb = builder.add(qo_, builder.mul(head.index, qs_))
                vs = []
                for i in range(8):
                    j = builder.add(jb, _I64(i))
                    j = builder.select(builder.icmp_signed(">", j, jmax_), jmax_, j)
                    kb = builder.add(ko_, builder.mul(j, ks_))
                    for acc in accs:
                        builder.store(zero8, acc)
                    with cgutils.for_range(builder, n) as loop:
                        d0 = builder.mul(loop.index, _I64(32))
                        for r in range(4):
                            d = builder.add(d0, _I64(8 * r))
                            kv = _vload(builder, kp, builder.add(kb, d))
                            qv = _vload(builder, qp, builder.add(qb, d))
                            builder.store(_vfma(builder, kv, qv, builder.load(accs[r])), accs[r])
                    a = [builder.load(x) for x in accs]
                    vs.append(builder.fadd(builder.fadd(a[0], a[2]), builder.fadd(a[1], a[3])))
                off = builder.add(builder.add(so_, builder.mul(head.index, ss_)),
                                  builder.mul(blk.index, _I64(8)))  # fmt: skip
                dst = builder.bitcast(builder.gep(sp, [off]), _V8F32.as_pointer())
                builder.store(_reduce8(builder, vs), dst, align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _wv32_ir(typingctx, v, vo, vstride, w, wo, wstride, j0, j1, ng, acc, ao, astride, dn):
    """The 32 accumulator slots of out[d] = sum_j w[j] * v[j, d] (ggml_vec_dot_f16 over
    the cells j, module docstring) for ng heads sharing the value rows: slot c (= 8 *
    ((j >> 3) & 3) + (j & 7) = j & 31) of head g sums its cells j in [j0, j1) in
    increasing j into acc.flat[ao + g * astride + c * dn:], columns d < dn & ~7; value
    row j at v.flat[vo + j * vstride:], weight w.flat[wo + g * wstride + j]. A slot's
    rows stay in L1 for all heads, its running sums in registers (64 columns at a
    time). Fused multiply-adds: exact products, as v and w hold halves."""
    ip = types.intp
    sig = types.void(v, ip, ip, w, ip, ip, ip, ip, ip, acc, ip, ip, ip)

    def codegen(context, builder, signature, args):
        vt, wt, at = signature.args[0], signature.args[3], signature.args[9]
        v_, vo_, vs_, w_, wo_, ws_, j0_, j1_, ng_, acc_, ao_, as_, dn_ = args
        vp = context.make_array(vt)(context, builder, v_).data
        wp = context.make_array(wt)(context, builder, w_).data
        ap = context.make_array(at)(context, builder, acc_).data
        zero8 = ir.Constant(_V8F32, [0.0] * 8)
        regs = [cgutils.alloca_once(builder, _V8F32) for _ in range(8)]
        n64 = builder.ashr(dn_, _I64(6))
        n8 = builder.ashr(builder.and_(dn_, _I64(63)), _I64(3))
        with cgutils.for_range(builder, _I64(32)) as slot:
            c = slot.index
            jf = builder.add(j0_, builder.and_(builder.sub(c, j0_), _I64(31)))
            nj = _count_from(builder, jf, j1_, 32)
            with cgutils.for_range(builder, ng_) as head:
                wb = builder.add(wo_, builder.mul(head.index, ws_))
                out0 = builder.add(builder.add(ao_, builder.mul(head.index, as_)),
                                   builder.mul(c, dn_))  # fmt: skip
                for width, count, first in ((8, n64, _I64(0)), (1, n8, builder.shl(n64, _I64(6)))):
                    with cgutils.for_range(builder, count) as chunk:
                        d0 = builder.add(first, builder.mul(chunk.index, _I64(8 * width)))
                        for r in regs[:width]:
                            builder.store(zero8, r)
                        with cgutils.for_range(builder, nj) as step:
                            j = builder.add(jf, builder.mul(step.index, _I64(32)))
                            wj = builder.load(builder.gep(wp, [builder.add(wb, j)]))
                            wv = builder.insert_element(ir.Constant(_V8F32, None), wj, _I32(0))
                            wv = builder.shuffle_vector(wv, wv, _ZEROS8)
                            row = builder.add(builder.add(vo_, builder.mul(j, vs_)), d0)
                            for i, r in enumerate(regs[:width]):
                                x = _vload(builder, vp, builder.add(row, _I64(8 * i)))
                                builder.store(_vfma(builder, x, wv, builder.load(r)), r)
                        for i, r in enumerate(regs[:width]):
                            off = builder.add(builder.add(out0, d0), _I64(8 * i))
                            p = builder.bitcast(builder.gep(ap, [off]), _V8F32.as_pointer())
                            builder.store(builder.load(r), p, align=4)
        return context.get_dummy_value()

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


@nb.njit(cache=True, nogil=True, inline="always")
def qk_heads_portable(kc, hk, qv, h0, ng, d32, s, j0, nblk, jmax, vc):
    """s[h0 + g, i] = the ggml_vec_dot_f16 sum of kc[min(j0 + i, jmax), hk, :d32] and
    qv[h0 + g, :d32] for g < ng, i < 8 * nblk (kc (C, Hkv, Dh), qv (H, Dh), s (H, *)):
    the query heads of one KV head against 8-row blocks of keys (vc: unused here)."""
    for i in range(8 * nblk):
        j = min(j0 + i, jmax)
        for g in range(ng):
            s[h0 + g, i] = qk32_portable(kc, j, hk, qv[h0 + g], d32)


@nb.njit(cache=True, nogil=True, inline="always")
def qk_heads_simd(kc, hk, qv, h0, ng, d32, s, j0, nblk, jmax, vc):
    """qk_heads_portable as <8 x float> code (kc, qv, s, vc C-contiguous), prefetching
    vc's rows [j0, j0 + 8 * nblk) of KV head hk (vc shaped as kc)."""
    _, Hkv, Dh = kc.shape
    if d32 == 64 and Dh == 64:  # the common head dims as constants: the d loops unroll
        _qk8_ir(kc, hk * 64, Hkv * 64, j0, jmax, nblk, qv, h0 * 64, 64, ng, 64, s,
                h0 * s.shape[1], s.shape[1], vc, 64)  # fmt: skip
    elif d32 == 128 and Dh == 128:
        _qk8_ir(kc, hk * 128, Hkv * 128, j0, jmax, nblk, qv, h0 * 128, 128, ng, 128, s,
                h0 * s.shape[1], s.shape[1], vc, 128)  # fmt: skip
    elif d32 > 0:
        _qk8_ir(kc, hk * Dh, Hkv * Dh, j0, jmax, nblk, qv, h0 * Dh, Dh, ng, d32, s,
                h0 * s.shape[1], s.shape[1], vc, Dh)  # fmt: skip
    else:
        for g in range(ng):
            s[h0 + g, : 8 * nblk] = np.float32(0.0)


@nb.njit(cache=True, nogil=True, inline="always")
def wv32_portable(vc, hk, s, h0, ng, base, j0, j1, acc):
    """acc[h, r, l, d] = the sum over cells j in [j0, j1) with j & 31 = 8 * r + l, in
    increasing j, of vc[j, hk, d] * s[h, j - base], for h in [h0, h0 + ng) (vc (C, Hkv,
    Dh), s (H, *), acc (H, 4, 8, Dh)): the accumulator slots of ggml_vec_dot_f16 over
    the cells."""
    Dh = vc.shape[2]
    for h in range(h0, h0 + ng):
        acc[h] = 0.0
        for j in range(j0, j1):
            wj = s[h, j - base]
            for d in range(Dh):
                acc[h, (j >> 3) & 3, j & 7, d] += vc[j, hk, d] * wj


@nb.njit(cache=True, nogil=True, inline="always")
def wv32_simd(vc, hk, s, h0, ng, base, j0, j1, acc):
    """wv32_portable with the first Dh & ~7 columns as <8 x float> code (all C-contiguous)."""
    _, Hkv, Dh = vc.shape
    dn = Dh & ~7
    nw = s.shape[1]
    wo = h0 * nw - base
    if Dh == 64:  # the common head dims as constants: LLVM unrolls the d loop
        _wv32_ir(vc, hk * 64, Hkv * 64, s, wo, nw, j0, j1, ng, acc, h0 * 2048, 2048, 64)
    elif Dh == 128:
        _wv32_ir(vc, hk * 128, Hkv * 128, s, wo, nw, j0, j1, ng, acc, h0 * 4096, 4096, 128)
    elif dn > 0:
        _wv32_ir(vc, hk * Dh, Hkv * Dh, s, wo, nw, j0, j1, ng, acc, h0 * 32 * Dh, 32 * Dh, Dh)
    for h in range(h0, h0 + ng):
        for d in range(dn, Dh):
            for c in range(32):
                acc[h, c >> 3, c & 7, d] = 0.0
            for j in range(j0, j1):
                acc[h, (j >> 3) & 3, j & 7, d] += vc[j, hk, d] * s[h, j - base]


QK32: Final = qk32_simd if AVAILABLE else qk32_portable
"""The q.k kernel of one head (qk32_portable's signature)."""
QK_HEADS: Final = qk_heads_simd if AVAILABLE else qk_heads_portable
"""The q.k kernel of the query heads of one KV head (qk_heads_portable's signature)."""
WV32: Final = wv32_simd if AVAILABLE else wv32_portable
"""The weights-times-values slots of the query heads of one KV head (wv32_portable's
signature)."""
