"""Q4_1 and Q8_0 dot products written as AVX2 code, on the GGUF bytes as they are.

ggml_vec_dot_q4_1_q8_1 / ggml_vec_dot_q8_0_q8_0 (ggml-cpu/arch/x86/quants.c) per
weight row and 32-value block: the 32 weight values in one register (Q4_1: the 16
bytes' low nibbles then their high nibbles, bytes_from_nibbles_32; Q8_0: the int8
values), `_mm256_maddubs_epi16` with the int8 activations then `_mm256_madd_epi16`
with ones give the 8 exact int32 sums of values 4l..4l+3 (Q8_0 first moves the
weights' signs onto the activations, `_mm256_sign_epi8`), converted to float and
acc = fma(f32(d_w * d_x), sums, acc); Q4_1 adds summs = fma(m_w, s_x, summs); the
result is hsum_float_8(acc) (+ summs). The same float operations in the same order
as ggml_dot.dot_blocks, so the results are the same bits.

numba has no vector types, so the block loop is emitted as LLVM IR by an
`@intrinsic` (the x86 intrinsics by name, `llvm.fma`, half -> float by `fpext`).
Each call does R weight rows at once (the activation block is loaded once for them)
and prefetches the next R rows. AVAILABLE is False on hosts without AVX2 / FMA /
F16C, and when numba's JIT is disabled; callers then use ggml_dot's portable kernels.

On AVX-512 VNNI hosts (VNNI; not under ONNXEXEC_ISA=avx2) each block's 8 lane sums
are one `vpdpbusd` (ymm, AVX512VL) instead of maddubs + madd: ggml's mul_sum_us8_pairs_float
does the same under __AVX512VNNI__ && __AVX512VL__. The int32 sums are the same
integers (vpdpbusd has no int16 step to saturate, and maddubs never saturates on these
operands, see `_lane_sums`), so the results are the same bits as the AVX2 code's.
"""

from __future__ import annotations

from typing import Any, Final

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from onnxexec.kernels.isa import has
from onnxexec.kernels.math.lanes import twins
from onnxexec.kernels.quant import qtypes as q

AVAILABLE: Final = not nb.config.DISABLE_JIT and has("avx2", "fma", "f16c")
VNNI: Final = AVAILABLE and has("avx512_vnni", "avx512vl")
ROWS: Final = 4  # weight rows per intrinsic call (one prefetch distance)
Q4_1_KIND: Final = 0
Q8_0_KIND: Final = 1
Q5_0_KIND: Final = 2
KINDS: Final = {q.Q4_1: Q4_1_KIND, q.Q8_0: Q8_0_KIND, q.Q5_0: Q5_0_KIND}  # ggml type -> kind
_BSIZE: Final = {Q4_1_KIND: q.Q4_1_BYTES, Q8_0_KIND: q.Q8_0_BYTES, Q5_0_KIND: q.Q5_0_BYTES}

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()
V32I8 = ir.VectorType(I8, 32)
_V16I8 = ir.VectorType(I8, 16)
V16I16 = ir.VectorType(I16, 16)
V8I32 = ir.VectorType(I32, 8)
V8F32 = ir.VectorType(F32, 8)


def fn(builder: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Type]) -> Any:
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


def load_at(builder: ir.IRBuilder, base: Any, off: Any, typ: ir.Type) -> Any:
    """An unaligned load of `typ` at byte offset `off` of the i8 pointer `base`."""
    p = builder.gep(base, [off])
    return builder.load(builder.bitcast(p, typ.as_pointer()), align=1)


def load_half(builder: ir.IRBuilder, base: Any, off: Any) -> Any:
    """The little-endian half at byte offset `off`, as float32 (vcvtph2ps)."""
    h = load_at(builder, base, off, I16)
    return builder.fpext(builder.bitcast(h, ir.HalfType()), F32)


def splat8(builder: ir.IRBuilder, v: Any) -> Any:
    u = builder.insert_element(ir.Constant(V8F32, ir.Undefined), v, I32(0))
    return builder.shuffle_vector(u, ir.Constant(V8F32, ir.Undefined), ir.Constant(V8I32, [0] * 8))


def _lane_sums(builder: ir.IRBuilder, ux: Any, sy: Any) -> Any:
    """<8 x i32>: lane l = sum of ux[i] * sy[i], i = 4l..4l+3 (ux unsigned, sy signed
    bytes; pairs never saturate here: |u x| <= 128 * 127). One vpdpbusd on VNNI hosts."""
    if VNNI:
        return vnni_sums(builder, ux, sy)
    madd_ub = fn(builder, "llvm.x86.avx2.pmadd.ub.sw", V16I16, [V32I8, V32I8])
    madd_wd = fn(builder, "llvm.x86.avx2.pmadd.wd", V8I32, [V16I16, V16I16])
    p = builder.call(madd_ub, [ux, sy])
    return builder.call(madd_wd, [p, ir.Constant(V16I16, [1] * 16)])


def vnni_sums(builder: ir.IRBuilder, ux: Any, sy: Any, acc: Any = None) -> Any:
    """acc (<8 x i32>, zero when None) + lane l = sum of ux[i] * sy[i], i = 4l..4l+3
    (ux unsigned, sy signed bytes), exact in int32: vpdpbusd (_mm256_dpbusd_epi32).
    Without VNNI (code compiled but gated off, e.g. under ONNXEXEC_ISA=avx2): maddubs +
    madd + add, the same integers when no byte pair's sum leaves int16."""
    a = ir.Constant(V8I32, [0] * 8) if acc is None else acc
    if not VNNI:
        madd_ub = fn(builder, "llvm.x86.avx2.pmadd.ub.sw", V16I16, [V32I8, V32I8])
        madd_wd = fn(builder, "llvm.x86.avx2.pmadd.wd", V8I32, [V16I16, V16I16])
        p = builder.call(madd_wd, [builder.call(madd_ub, [ux, sy]), ir.Constant(V16I16, [1] * 16)])
        return builder.add(a, p)
    dp = fn(builder, "llvm.x86.avx512.vpdpbusd.256", V8I32, [V8I32] * 3)
    return builder.call(dp, [a, builder.bitcast(ux, V8I32), builder.bitcast(sy, V8I32)])


def _lane_sums_signed(builder: ir.IRBuilder, psign: Any, qv: Any, xv: Any) -> Any:
    """_lane_sums of signed weight bytes qv: their signs moved onto the activations
    (mul_sum_i8_pairs_float: _mm256_sign_epi8)."""
    return _lane_sums(builder, builder.call(psign, [qv, qv]), builder.call(psign, [xv, qv]))


def _q5_0_values(builder: ir.IRBuilder, wp: Any, bp: Any) -> Any:
    """The 32 values of the Q5_0 block at byte bp of wp, as <32 x i8> in -16..15: value
    i = nibble i (low nibbles of qs, then high) | bit i of the little-endian qh << 4,
    minus 16 (bytes_from_nibbles_32 | bytes_from_bits_32 in ggml_vec_dot_q5_0_q8_0)."""
    qb = load_at(builder, wp, builder.add(bp, I64(6)), _V16I8)
    lo = builder.and_(qb, ir.Constant(_V16I8, [15] * 16))
    hi = builder.lshr(qb, ir.Constant(_V16I8, [4] * 16))
    nib = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(I32, 32), list(range(32))))
    qh = load_at(builder, wp, builder.add(bp, I64(2)), I32)
    bits = builder.zext(builder.bitcast(qh, ir.VectorType(ir.IntType(1), 32)), V32I8)
    v = builder.or_(nib, builder.shl(bits, ir.Constant(V32I8, [4] * 32)))
    return builder.sub(v, ir.Constant(V32I8, [16] * 32))


def hsum8(builder: ir.IRBuilder, acc: Any) -> Any:
    """hsum_float_8: ((a0 + a2) + (a1 + a3)), a_i = acc[i + 4] + acc[i]."""
    e = [builder.extract_element(acc, I32(i)) for i in range(8)]
    a = [builder.fadd(e[i + 4], e[i]) for i in range(4)]
    return builder.fadd(builder.fadd(a[0], a[2]), builder.fadd(a[1], a[3]))


def _make_dot(kind: int, rows: int, cols: int = 1) -> Any:
    """An intrinsic dot(w, off, stride, nblk, x8, xo, xst, do, so, out, o, ostep): for r <
    `rows` and c < `cols`, out[o + c ostep + r] = the dot product of the weight row at
    byte off + r * stride of w (u8) with the activations x8[xo + c K:][:K] (i8, K = 32
    nblk), their block scales at xst[do + 3 c nblk + b] and Q8_1 sums at xst[so + 3 c
    nblk + b] (f32). Each weight block is loaded and unpacked once for the `cols`
    activation rows; every output keeps its own accumulators, so its float steps are
    those of cols = 1. Offsets index the flat data of C-contiguous arrays."""
    bsize = _BSIZE[kind]

    @intrinsic
    def dot(typingctx, w, off, stride, nblk, x8, xo, xst, do, so, out, o, ostep):
        ip = types.intp
        sig = types.void(w, ip, ip, ip, x8, ip, xst, ip, ip, out, ip, ip)

        def codegen(context, builder, signature, args):
            wt, _, _, _, x8t, _, xstt, _, _, outt, _, _ = signature.args
            w_, off_, stride_, nblk_, x8_, xo_, xst_, do_, so_, out_, o_, ostep_ = args

            def data(aty: Any, a: Any) -> Any:
                return context.make_array(aty)(context, builder, a).data

            wp, xp, sp, op = data(wt, w_), data(x8t, x8_), data(xstt, xst_), data(outt, out_)
            fma8 = fn(builder, "llvm.fma.v8f32", V8F32, [V8F32] * 3)
            fma1 = fn(builder, "llvm.fma.f32", F32, [F32] * 3)
            pf = fn(builder, "llvm.prefetch.p0", ir.VoidType(), [wp.type, I32, I32, I32])
            psign = fn(builder, "llvm.x86.avx2.psign.b", V32I8, [V32I8, V32I8])
            zero8 = ir.Constant(V8F32, [0.0] * 8)
            rc = [(r, c) for r in range(rows) for c in range(cols)]
            accs = {k: cgutils.alloca_once_value(builder, zero8) for k in rc}
            summs = {k: cgutils.alloca_once_value(builder, F32(0.0)) for k in rc}
            ahead = builder.mul(stride_, I64(rows))
            xstep = builder.mul(nblk_, I64(32))  # one activation row of x8
            sstep = builder.mul(nblk_, I64(3))  # one activation row of xst
            with cgutils.for_range(builder, nblk_) as loop:
                b = loop.index
                xv, xd, xs = [], [], []
                for c in range(cols):
                    xo_c = builder.add(xo_, builder.mul(xstep, I64(c)))
                    s_c = builder.mul(sstep, I64(c))
                    xv.append(
                        load_at(builder, xp, builder.add(xo_c, builder.mul(b, I64(32))), V32I8)
                    )
                    xd.append(
                        builder.load(builder.gep(sp, [builder.add(builder.add(do_, s_c), b)]))
                    )
                    xs.append(
                        builder.load(builder.gep(sp, [builder.add(builder.add(so_, s_c), b)]))
                    )
                for r in range(rows):
                    bp = builder.add(
                        builder.add(off_, builder.mul(stride_, I64(r))),
                        builder.mul(b, I64(bsize)),
                    )
                    # the next `rows` rows, one block ahead per block: streams them in
                    ahead_p = builder.gep(wp, [builder.add(bp, ahead)])
                    builder.call(pf, [ahead_p, I32(0), I32(3), I32(1)])
                    d = load_half(builder, wp, bp)
                    if kind == Q4_1_KIND:
                        qb = load_at(builder, wp, builder.add(bp, I64(4)), _V16I8)
                        lo = builder.and_(qb, ir.Constant(_V16I8, [15] * 16))
                        hi = builder.lshr(qb, ir.Constant(_V16I8, [4] * 16))
                        idx = ir.Constant(ir.VectorType(I32, 32), list(range(32)))
                        ux = builder.shuffle_vector(lo, hi, idx)
                        m = load_half(builder, wp, builder.add(bp, I64(2)))
                    else:
                        if kind == Q5_0_KIND:
                            qv = _q5_0_values(builder, wp, bp)
                        else:
                            qv = load_at(builder, wp, builder.add(bp, I64(2)), V32I8)
                        ux = builder.call(psign, [qv, qv])
                    for c in range(cols):
                        if kind == Q4_1_KIND:
                            s = _lane_sums(builder, ux, xv[c])
                        else:
                            s = _lane_sums(builder, ux, builder.call(psign, [xv[c], qv]))
                        dd = splat8(builder, builder.fmul(d, xd[c]))
                        a_p = accs[r, c]
                        acc = builder.call(fma8, [dd, builder.sitofp(s, V8F32), builder.load(a_p)])
                        builder.store(acc, a_p)
                        if kind == Q4_1_KIND:
                            s_p = summs[r, c]
                            builder.store(builder.call(fma1, [m, xs[c], builder.load(s_p)]), s_p)
            for r, c in rc:
                res = hsum8(builder, builder.load(accs[r, c]))
                if kind == Q4_1_KIND:
                    res = builder.fadd(res, builder.load(summs[r, c]))
                oi = builder.add(builder.add(o_, I64(r)), builder.mul(ostep_, I64(c)))
                builder.store(res, builder.gep(op, [oi]))
            return context.get_dummy_value()

        return sig, codegen

    return dot


COLS: Final = 4  # activation rows per multi-token call (prefill, batched decode)
TRIO: Final = 3  # activation rows per call for what is left below COLS: 2-3 sequences
PAIR: Final = 2  # share each weight block load, as COLS rows do
_DOTS = {
    (kind, r, c): _make_dot(kind, r, c)
    for kind in (Q4_1_KIND, Q8_0_KIND, Q5_0_KIND)
    for r in (ROWS, 1)
    for c in (COLS, TRIO, PAIR, 1)
    if (r, c) not in ((ROWS, COLS), (ROWS, TRIO))
}
# ROWS x COLS (TRIO) tiles run as two (ROWS / 2) x COLS (TRIO) ones: 16 (12)
# accumulators plus the activation and weight registers exceed AVX2's 16 ymm registers
# (spills); the halves fit and were ~20% faster per output (SmolLM2's 1536 x 576 Q4_1,
# 4 and 8 rows, one thread). ROWS x PAIR has 8 accumulators and fits whole. Same
# outputs, same float steps each (see _make_dot).
HALF: Final = ROWS // 2
_HC = {kind: _make_dot(kind, HALF, COLS) for kind in (Q4_1_KIND, Q8_0_KIND, Q5_0_KIND)}
_HT = {kind: _make_dot(kind, HALF, TRIO) for kind in (Q4_1_KIND, Q8_0_KIND, Q5_0_KIND)}
_Q41_HC, _Q41_RP, _Q41_R1 = _HC[Q4_1_KIND], _DOTS[Q4_1_KIND, ROWS, PAIR], _DOTS[Q4_1_KIND, ROWS, 1]
_Q41_HT, _Q41_1T = _HT[Q4_1_KIND], _DOTS[Q4_1_KIND, 1, TRIO]
_Q41_1C, _Q41_1P, _Q41_11 = (
    _DOTS[Q4_1_KIND, 1, COLS],
    _DOTS[Q4_1_KIND, 1, PAIR],
    _DOTS[Q4_1_KIND, 1, 1],
)
_Q80_HC, _Q80_RP, _Q80_R1 = _HC[Q8_0_KIND], _DOTS[Q8_0_KIND, ROWS, PAIR], _DOTS[Q8_0_KIND, ROWS, 1]
_Q80_HT, _Q80_1T = _HT[Q8_0_KIND], _DOTS[Q8_0_KIND, 1, TRIO]
_Q80_1C, _Q80_1P, _Q80_11 = (
    _DOTS[Q8_0_KIND, 1, COLS],
    _DOTS[Q8_0_KIND, 1, PAIR],
    _DOTS[Q8_0_KIND, 1, 1],
)
_Q50_HC, _Q50_RP, _Q50_R1 = _HC[Q5_0_KIND], _DOTS[Q5_0_KIND, ROWS, PAIR], _DOTS[Q5_0_KIND, ROWS, 1]
_Q50_HT, _Q50_1T = _HT[Q5_0_KIND], _DOTS[Q5_0_KIND, 1, TRIO]
_Q50_1C, _Q50_1P, _Q50_11 = (
    _DOTS[Q5_0_KIND, 1, COLS],
    _DOTS[Q5_0_KIND, 1, PAIR],
    _DOTS[Q5_0_KIND, 1, 1],
)


@nb.njit(cache=True, nogil=True, inline="always")
def _dot(kind, full, ncol, raw, off, rb, nblk, x8, xo, xst, do, so, out, o, ostep):
    """The intrinsic of (kind, ROWS or 1 weight rows, COLS / TRIO / PAIR / 1 activation
    rows)."""
    a = (raw, off, rb, nblk, x8, xo, xst, do, so, out, o, ostep)
    b = (raw, off + HALF * rb, rb, nblk, x8, xo, xst, do, so, out, o + HALF, ostep)
    if kind == Q4_1_KIND:
        if full:
            if ncol == COLS:
                _Q41_HC(*a)
                _Q41_HC(*b)
            elif ncol == TRIO:
                _Q41_HT(*a)
                _Q41_HT(*b)
            elif ncol == PAIR:
                _Q41_RP(*a)
            else:
                _Q41_R1(*a)
        elif ncol == COLS:
            _Q41_1C(*a)
        elif ncol == TRIO:
            _Q41_1T(*a)
        elif ncol == PAIR:
            _Q41_1P(*a)
        else:
            _Q41_11(*a)
    elif kind == Q8_0_KIND:
        if full:
            if ncol == COLS:
                _Q80_HC(*a)
                _Q80_HC(*b)
            elif ncol == TRIO:
                _Q80_HT(*a)
                _Q80_HT(*b)
            elif ncol == PAIR:
                _Q80_RP(*a)
            else:
                _Q80_R1(*a)
        elif ncol == COLS:
            _Q80_1C(*a)
        elif ncol == TRIO:
            _Q80_1T(*a)
        elif ncol == PAIR:
            _Q80_1P(*a)
        else:
            _Q80_11(*a)
    else:
        if full:
            if ncol == COLS:
                _Q50_HC(*a)
                _Q50_HC(*b)
            elif ncol == TRIO:
                _Q50_HT(*a)
                _Q50_HT(*b)
            elif ncol == PAIR:
                _Q50_RP(*a)
            else:
                _Q50_R1(*a)
        elif ncol == COLS:
            _Q50_1C(*a)
        elif ncol == TRIO:
            _Q50_1T(*a)
        elif ncol == PAIR:
            _Q50_1P(*a)
        else:
            _Q50_11(*a)


@nb.njit(cache=True, nogil=True, inline="always")
def rows(raw, row_bytes, kind, x8, xst, out, col0, n0, n1, cols):
    """out[t, col0 + n] for the weight rows n in [n0, n1) and every activation row t
    (see `_make_dot`): COLS activation rows per call when cols >= COLS, then the rest
    (below COLS) in one TRIO or PAIR call when cols allows (cols = 1: one at a time)."""
    T, K = x8.shape
    N = out.shape[1]
    nblk = K // 32
    r = n0
    while r < n1:
        full = r + ROWS <= n1
        t = 0
        while t < T:
            if cols >= COLS and t + COLS <= T:
                ncol = COLS
            elif cols >= TRIO and t + TRIO <= T:
                ncol = TRIO
            elif cols >= PAIR and t + PAIR <= T:
                ncol = PAIR
            else:
                ncol = 1
            do = t * 3 * nblk
            _dot(
                kind,
                full,
                ncol,
                raw,
                r * row_bytes,
                row_bytes,
                nblk,
                x8,
                t * K,
                xst,
                do,
                do + nblk,
                out,
                t * N + col0 + r,
                N,
            )
            t += ncol
        r += ROWS if full else 1


def _dot_many(raws, row_bytes, kinds, col0s, x8, xst, out, n_chunks, cols=COLS):
    """out[:, col0s[i] + n] = (W_i . x)[:, n] for every weight i (GGUF bytes raws[i],
    row_bytes[i] per row, kinds[i]; all rows K = x8.shape[1] long): the weights' groups
    of ROWS rows in one range cut into n_chunks spans (one parallel region for Q|K|V).
    x8 (T, K) int8, xst (T, 3, K/32) from actquant.quantize_act8; out C-contiguous."""
    nw = len(raws)
    gs = np.zeros(nw + 1, np.int64)
    for i in range(nw):
        gs[i + 1] = gs[i] + -(-(raws[i].shape[0] // row_bytes[i]) // ROWS)
    total = gs[nw]
    n_chunks = max(1, min(total, n_chunks))
    for c in nb.prange(n_chunks):
        g0 = c * total // n_chunks
        g1 = (c + 1) * total // n_chunks
        for i in range(nw):
            a = max(g0, gs[i])
            b = min(g1, gs[i + 1])
            if a < b:
                n = raws[i].shape[0] // row_bytes[i]
                n0 = (a - gs[i]) * ROWS
                n1 = min(n, (b - gs[i]) * ROWS)
                rows(raws[i], row_bytes[i], kinds[i], x8, xst, out, col0s[i], n0, n1, cols)


DOT_MANY = twins(_dot_many)
"""(parallel, serial) kernels of `_dot_many` (lanes.pick chooses)."""
