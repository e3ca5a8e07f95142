"""Q4_K and tiled Q6_K x Q8_K products for tiles of weight rows x activation rows (AVX2).

The orders are those of ggml_simd_k (llama.cpp's repacked Q4_K, q4_K_8x8_q8_K): per
output, exact integer totals tot = sum sc q x and tmin = sum_j min_j (bsums[2j] +
bsums[2j + 1]), per 64 values (gemm) or per super-block (gemv), then
acc = fma(float(tot), f32(half(d) x.d), acc), accm = fma(float(tmin), f32(half(dmin)
x.d), accm), result acc - accm. ggml_simd_k computes each output on its own: one
horizontal sum of 8 int32 lanes and scalar float steps per output and 64 values,
which cost more than the products themselves. Here a call covers `rows` weight rows
x `cols` activation rows (output k = c rows + r) and handles them in groups of 8
(or 4): the 8 lane vectors of a group are transposed and added together (unpacks,
adds, one 128-bit swap: exact integer sums in any order) into one vector whose lane
k is output k's total, and the float steps run on that vector, lane k doing exactly
output k's scalar operations (IEEE fma / mul are per lane). The min terms come from
one `_mm256_madd_epi16` per group of (min pairs) x (bsum pairs) vectors. Q6_K in
ggml-cpu/tiled's order (8 activation rows or more) sums each output's 8 lanes once
per super-block (s1), then res = f32(half(d) float(s1)), acc = fma(res, x.d, acc):
the same transposed sums, the two float steps as vector ops. Shared by ggml_simd_k
(its helpers for the Q4_K scales and the Q6_K values live here).
"""

from __future__ import annotations

from typing import Any, Final

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_simd import (
    F32,
    I8,
    I16,
    I32,
    I64,
    V8I32,
    V16I16,
    V32I8,
    fn,
    load_at,
    load_half,
)

QK_K: Final = 256
GROUP: Final = 8  # outputs per transposed vector (one AVX2 register of int32 / float)
_V4I32 = ir.VectorType(I32, 4)
_V16I8 = ir.VectorType(I8, 16)
_V16I32 = ir.VectorType(I32, 16)


def arg_ptrs(context: Any, builder: ir.IRBuilder, sig: Any, args: Any, idx: tuple) -> list:
    return [context.make_array(sig.args[i])(context, builder, args[i]).data for i in idx]


def madd(builder: ir.IRBuilder, u8: Any, x: Any, scale16: Any) -> Any:
    """<8 x i32> lane l = sum over i = 4l..4l+3 of scale(i) u8[i] x[i] (u8 unsigned,
    x signed bytes; u8 <= 63, so maddubs never saturates)."""
    madd_ub = fn(builder, "llvm.x86.avx2.pmadd.ub.sw", V16I16, [V32I8, V32I8])
    madd_wd = fn(builder, "llvm.x86.avx2.pmadd.wd", V8I32, [V16I16, V16I16])
    return builder.call(madd_wd, [builder.call(madd_ub, [u8, x]), scale16])


def vconst(typ: ir.VectorType, v: int) -> Any:
    return ir.Constant(typ, [v] * typ.count)


def pair_sums(builder: ir.IRBuilder, v16: Any) -> Any:
    """<16 x i32> -> <8 x i32>: lane l = v16[2l] + v16[2l + 1]."""
    undef = ir.Constant(_V16I32, ir.Undefined)
    even = builder.shuffle_vector(v16, undef, ir.Constant(V8I32, list(range(0, 16, 2))))
    odd = builder.shuffle_vector(v16, undef, ir.Constant(V8I32, list(range(1, 16, 2))))
    return builder.add(even, odd)


def q4k_scales(builder: ir.IRBuilder, wp: Any, o: Any) -> tuple[Any, Any]:
    """(scales, mins) of the Q4_K super-block at byte o, as <8 x i32> (sub-block j in
    lane j): get_scale_min_k4 for all 8 at once (the utmp / kmask steps of
    ggml_vec_dot_q4_K_q8_K)."""
    u = [load_at(builder, wp, builder.add(o, I64(4 + 4 * k)), I32) for k in range(3)]
    km1, km2, km3 = I32(0x3F3F3F3F), I32(0x0F0F0F0F), I32(0x03030303)
    sh = builder.lshr
    u3 = builder.or_(
        builder.and_(sh(u[2], I32(4)), km2),
        builder.shl(builder.and_(sh(u[1], I32(6)), km3), I32(4)),
    )
    u2 = builder.and_(u[1], km1)
    u1 = builder.or_(
        builder.and_(u[2], km2), builder.shl(builder.and_(sh(u[0], I32(6)), km3), I32(4))
    )
    u0 = builder.and_(u[0], km1)
    v2 = ir.VectorType(I32, 2)

    def bytes8(a: Any, b: Any) -> Any:
        v = builder.insert_element(ir.Constant(v2, ir.Undefined), a, I32(0))
        v = builder.insert_element(v, b, I32(1))
        return builder.zext(builder.bitcast(v, ir.VectorType(I8, 8)), V8I32)

    return bytes8(u0, u1), bytes8(u2, u3)


def _shuf(builder: ir.IRBuilder, a: Any, b: Any, mask: list[int]) -> Any:
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(I32, len(mask)), mask))


def _transpose_sums(builder: ir.IRBuilder, vs: list[Any]) -> Any:
    """4 or 8 <8 x i32> -> <len(vs) x i32>, lane k = the sum of vs[k]'s lanes (exact)."""
    lo, hi = [0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15]
    s = [
        builder.add(_shuf(builder, a, b, lo), _shuf(builder, a, b, hi))
        for a, b in zip(vs[0::2], vs[1::2], strict=True)
    ]  # s lanes: a0+a2, b0+b2, a1+a3, b1+b3 | the same for lanes 4..7
    lo, hi = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]
    u = [
        builder.add(_shuf(builder, a, b, lo), _shuf(builder, a, b, hi))
        for a, b in zip(s[0::2], s[1::2], strict=True)
    ]  # u lanes: 4 outputs' sums of lanes 0..3 | the same 4 outputs' lanes 4..7
    if len(u) == 1:
        return builder.add(
            _shuf(builder, u[0], u[0], [0, 1, 2, 3]), _shuf(builder, u[0], u[0], [4, 5, 6, 7])
        )
    a, b = u
    return builder.add(
        _shuf(builder, a, b, [0, 1, 2, 3, 8, 9, 10, 11]),
        _shuf(builder, a, b, [4, 5, 6, 7, 12, 13, 14, 15]),
    )


def _gather(builder: ir.IRBuilder, vs: list[Any], picks: list[tuple[int, int]]) -> Any:
    """<len(picks) x i32>, lane k = vs[picks[k][0]][picks[k][1]] (vs: <4 x i32> each)."""
    cat = list(vs)
    while len(cat) > 1:  # concatenate into one vector (a shuffle tree LLVM simplifies)
        n = cat[0].type.count
        nxt = [
            _shuf(builder, a, b, list(range(2 * n)))
            for a, b in zip(cat[0::2], cat[1::2], strict=True)
        ]
        if len(cat) % 2:
            pad = _shuf(builder, cat[-1], cat[-1], list(range(n)) + [0] * n)
            nxt.append(pad)
        cat = nxt
    v = cat[0]
    return _shuf(builder, v, v, [4 * i + j for i, j in picks])


def make_q4k_tile(rows: int, cols: int, gemm: bool) -> Any:
    """An intrinsic with ggml_simd_k._make_k_dot's signature dot(w, off, stride, nsb,
    x8, xo, xd, xdo, bs, bo, out, o, ostep) for Q4_K: out[o + c ostep + r] for r <
    `rows`, c < `cols`; `gemm`: the per-64-values order, else the per-super-block one.
    rows * cols must be 4 or a multiple of 8."""
    n_out = rows * cols
    gsize = 4 if n_out == 4 else GROUP
    assert n_out % gsize == 0
    groups = [list(range(g, g + gsize)) for g in range(0, n_out, gsize)]
    vf = ir.VectorType(F32, gsize)
    vi16 = ir.VectorType(I16, 2 * gsize)

    @intrinsic
    def dot(typingctx, w, off, stride, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep):
        ip = types.intp
        sig = types.void(w, ip, ip, ip, x8, ip, xd, ip, bs, ip, out, ip, ip)

        def codegen(context, builder, signature, args):
            wp, xp, dp, bp, op = arg_ptrs(context, builder, signature, args, (0, 4, 6, 8, 10))
            off_, stride_, nsb_, _, xo_, _, xdo_, _, bo_, _, o_, ostep_ = args[1:]
            fmav = fn(builder, f"llvm.fma.v{gsize}f32", vf, [vf] * 3)
            madd_wd = fn(builder, "llvm.x86.avx2.pmadd.wd", V8I32, [V16I16, V16I16])
            pf = fn(builder, "llvm.prefetch.p0", ir.VoidType(), [wp.type, I32, I32, I32])
            zero = ir.Constant(vf, [0.0] * gsize)
            accs = [cgutils.alloca_once_value(builder, zero) for _ in groups]
            accms = [cgutils.alloca_once_value(builder, zero) for _ in groups]
            ahead = builder.mul(stride_, I64(rows))
            kstep = builder.mul(nsb_, I64(QK_K))
            undef8 = ir.Constant(ir.VectorType(I16, 8), ir.Undefined)
            with cgutils.for_range(builder, nsb_) as loop:
                i = loop.index
                xv, yd, bsp = [], [], []
                for c in range(cols):
                    xo = builder.add(
                        builder.add(xo_, builder.mul(kstep, I64(c))), builder.mul(i, I64(QK_K))
                    )
                    xv.append(
                        [
                            load_at(builder, xp, builder.add(xo, I64(32 * j)), V32I8)
                            for j in range(8)
                        ]
                    )
                    di = builder.add(builder.add(xdo_, builder.mul(nsb_, I64(c))), i)
                    yd.append(builder.load(builder.gep(dp, [di])))
                    bi = builder.add(
                        builder.add(bo_, builder.mul(nsb_, I64(16 * c))), builder.mul(i, I64(16))
                    )
                    bsv = builder.load(
                        builder.bitcast(builder.gep(bp, [bi]), _V16I32.as_pointer()), align=4
                    )
                    # bsum pairs (one per 32 values, |.| < 2^12) as i16 pairs: <4 x i32>
                    b16 = builder.trunc(pair_sums(builder, bsv), ir.VectorType(I16, 8))
                    bsp.append(builder.bitcast(b16, _V4I32))
                ob, sc16, mnp, dw, dmw = [], [], [], [], []
                for r in range(rows):
                    o = builder.add(
                        builder.add(off_, builder.mul(stride_, I64(r))),
                        builder.mul(i, I64(q.Q4_K_BYTES)),
                    )
                    ob.append(o)
                    for k in range(0, q.Q4_K_BYTES, 64):  # the same blocks `rows` rows ahead
                        p = builder.gep(wp, [builder.add(builder.add(o, ahead), I64(k))])
                        builder.call(pf, [p, I32(0), I32(3), I32(1)])
                    sc, mn = q4k_scales(builder, wp, o)
                    sc16.append(builder.trunc(sc, ir.VectorType(I16, 8)))
                    mnp.append(builder.bitcast(builder.trunc(mn, ir.VectorType(I16, 8)), _V4I32))
                    dw.append(load_half(builder, wp, o))
                    dmw.append(load_half(builder, wp, builder.add(o, I64(2))))
                dd, dm = [], []
                for g in groups:
                    vd = ir.Constant(vf, ir.Undefined)
                    vm = ir.Constant(vf, ir.Undefined)
                    for lane, k in enumerate(g):
                        c, r = divmod(k, rows)
                        vd = builder.insert_element(vd, builder.fmul(dw[r], yd[c]), I32(lane))
                        vm = builder.insert_element(vm, builder.fmul(dmw[r], yd[c]), I32(lane))
                    dd.append(vd)
                    dm.append(vm)
                tot_acc = [None] * len(groups)
                min_acc = [None] * len(groups)
                parts_sb: list = []
                for ch in range(4):
                    parts = []
                    for r in range(rows):
                        qb = load_at(builder, wp, builder.add(ob[r], I64(16 + 32 * ch)), V32I8)
                        qlo = builder.and_(qb, vconst(V32I8, 15))
                        qhi = builder.lshr(qb, vconst(V32I8, 4))
                        s_lo = builder.shuffle_vector(
                            sc16[r], undef8, ir.Constant(_V16I32, [2 * ch] * 16)
                        )
                        s_hi = builder.shuffle_vector(
                            sc16[r], undef8, ir.Constant(_V16I32, [2 * ch + 1] * 16)
                        )
                        row_parts = []
                        for c in range(cols):
                            lo = madd(builder, qlo, xv[c][2 * ch], s_lo)
                            hi = madd(builder, qhi, xv[c][2 * ch + 1], s_hi)
                            v = builder.add(lo, hi)
                            if not gemm and ch:  # gemv: lanes summed over the chunks
                                v = builder.add(parts_sb[r][c], v)
                            row_parts.append(v)
                        parts.append(row_parts)
                    if not gemm:
                        parts_sb = parts
                    for gi, g in enumerate(groups):
                        am = _gather(builder, mnp, [(k % rows, ch) for k in g])
                        ab = _gather(builder, bsp, [(k // rows, ch) for k in g])
                        tmin = _min_madd(builder, madd_wd, am, ab, vi16, gsize)
                        if gemm:
                            tot = _transpose_sums(builder, [parts[k % rows][k // rows] for k in g])
                            _fma_vec(builder, fmav, tot, dd[gi], accs[gi])
                            _fma_vec(builder, fmav, tmin, dm[gi], accms[gi])
                        else:
                            min_acc[gi] = (
                                tmin if min_acc[gi] is None else builder.add(min_acc[gi], tmin)
                            )
                if not gemm:  # one transposed sum per super-block (exact integers)
                    for gi, g in enumerate(groups):
                        vs = [parts_sb[k % rows][k // rows] for k in g]
                        tot_acc[gi] = _transpose_sums(builder, vs)
                        _fma_vec(builder, fmav, tot_acc[gi], dd[gi], accs[gi])
                        _fma_vec(builder, fmav, min_acc[gi], dm[gi], accms[gi])
            for gi, g in enumerate(groups):
                res = builder.fsub(builder.load(accs[gi]), builder.load(accms[gi]))
                for lane, k in enumerate(g):
                    c, r = divmod(k, rows)
                    oi = builder.add(builder.add(o_, I64(r)), builder.mul(ostep_, I64(c)))
                    builder.store(builder.extract_element(res, I32(lane)), builder.gep(op, [oi]))
            return context.get_dummy_value()

        return sig, codegen

    return dot


def _min_madd(builder: ir.IRBuilder, madd_wd: Any, am: Any, ab: Any, vi16: Any, gsize: int) -> Any:
    """lane k = the two min x bsum-pair products of output k (i16 pairs in am, ab)."""
    a = builder.bitcast(am, vi16)
    b = builder.bitcast(ab, vi16)
    if gsize == 8:
        return builder.call(madd_wd, [a, b])
    wide = ir.Constant(_V16I32, list(range(8)) + [8] * 8)
    z = ir.Constant(vi16, [0] * 8)
    r = builder.call(
        madd_wd, [builder.shuffle_vector(a, z, wide), builder.shuffle_vector(b, z, wide)]
    )
    return _shuf(builder, r, r, [0, 1, 2, 3])


def _fma_vec(builder: ir.IRBuilder, fmav: Any, isum: Any, d: Any, acc_p: Any) -> None:
    """*acc_p = fma(float(isum), d, *acc_p), lane by lane."""
    v = builder.call(fmav, [builder.sitofp(isum, d.type), d, builder.load(acc_p)])
    builder.store(v, acc_p)


def q6k_values(builder: ir.IRBuilder, wp: Any, o: Any) -> tuple[list[Any], list[Any], Any]:
    """The Q6_K super-block at byte o: its 8 x 32 values (ql nibble | qh bit pair << 4,
    unsigned 0..63) as <32 x i8>, the matching <16 x i16> scale vectors (two 16-value
    scales each) and the 16 int8 scales."""
    sc8 = load_at(builder, wp, builder.add(o, I64(192)), _V16I8)
    scv = builder.sext(sc8, V16I16)
    undef16 = ir.Constant(V16I16, ir.Undefined)
    us, scs = [], []
    for h in range(2):
        ql0 = load_at(builder, wp, builder.add(o, I64(64 * h)), V32I8)
        ql1 = load_at(builder, wp, builder.add(o, I64(64 * h + 32)), V32I8)
        qh = load_at(builder, wp, builder.add(o, I64(128 + 32 * h)), V32I8)
        for quarter in range(4):
            ql = ql0 if quarter % 2 == 0 else ql1
            if quarter < 2:
                lo = builder.and_(ql, vconst(V32I8, 15))
            else:
                lo = builder.lshr(ql, vconst(V32I8, 4))
            hb = builder.and_(builder.lshr(qh, vconst(V32I8, 2 * quarter)), vconst(V32I8, 3))
            us.append(builder.or_(lo, builder.shl(hb, vconst(V32I8, 4))))
            ch = 4 * h + quarter
            idx = ir.Constant(_V16I32, [2 * ch] * 8 + [2 * ch + 1] * 8)
            scs.append(builder.shuffle_vector(scv, undef16, idx))
    return us, scs, sc8


def q6k_isum(builder: ir.IRBuilder, vals: tuple, xv: list[Any], bsv: Any) -> Any:
    """<8 x i32> of ggml_vec_dot_q6_K_q8_K: lane l = the scaled products of the values
    4l..4l+3 of every 32 (q6k_values) with the activations xv (8 x <32 x i8>), minus
    32 (sc[2l] bsums[2l] + sc[2l+1] bsums[2l+1]) (the -32 offset; bsv <16 x i32>)."""
    us, scs, sc8 = vals
    acc = None
    for ch in range(8):
        p = madd(builder, us[ch], xv[ch], scs[ch])
        acc = p if acc is None else builder.add(acc, p)
    # sc[2l] bsums[2l] + sc[2l + 1] bsums[2l + 1] in one `_mm256_madd_epi16`: |bsums| <=
    # 16 * 128 fits int16 and the products' pair sums int32 (exact, as any order)
    madd_wd = fn(builder, "llvm.x86.avx2.pmadd.wd", V8I32, [V16I16, V16I16])
    corr = builder.call(madd_wd, [builder.sext(sc8, V16I16), builder.trunc(bsv, V16I16)])
    return builder.sub(acc, builder.shl(corr, vconst(V8I32, 5)))


def make_q6k_tiled_tile(rows: int, cols: int) -> Any:
    """An intrinsic with ggml_simd_k._make_k_dot's signature for Q6_K in ggml-cpu/tiled's
    order: per super-block and output, s1 = the total of q6k_isum's lanes, res =
    f32(half(d) float(s1)), acc = fma(res, x.d, acc); out[o + c ostep + r] = acc for
    r < `rows`, c < `cols` (rows * cols 4 or a multiple of 8), outputs in groups whose
    totals and float steps are vectors (module docstring)."""
    n_out = rows * cols
    gsize = 4 if n_out == 4 else GROUP
    assert n_out % gsize == 0
    groups = [list(range(g, g + gsize)) for g in range(0, n_out, gsize)]
    vf = ir.VectorType(F32, gsize)

    @intrinsic
    def dot(typingctx, w, off, stride, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep):
        ip = types.intp
        sig = types.void(w, ip, ip, ip, x8, ip, xd, ip, bs, ip, out, ip, ip)

        def codegen(context, builder, signature, args):
            wp, xp, dp, bp, op = arg_ptrs(context, builder, signature, args, (0, 4, 6, 8, 10))
            off_, stride_, nsb_, _, xo_, _, xdo_, _, bo_, _, o_, ostep_ = args[1:]
            fmav = fn(builder, f"llvm.fma.v{gsize}f32", vf, [vf] * 3)
            pf = fn(builder, "llvm.prefetch.p0", ir.VoidType(), [wp.type, I32, I32, I32])
            accs = [
                cgutils.alloca_once_value(builder, ir.Constant(vf, [0.0] * gsize)) for _ in groups
            ]
            ahead = builder.mul(stride_, I64(rows))
            kstep = builder.mul(nsb_, I64(QK_K))
            with cgutils.for_range(builder, nsb_) as loop:
                i = loop.index
                xv, yd, bsv = [], [], []
                for c in range(cols):
                    xo = builder.add(
                        builder.add(xo_, builder.mul(kstep, I64(c))), builder.mul(i, I64(QK_K))
                    )
                    xv.append(
                        [
                            load_at(builder, xp, builder.add(xo, I64(32 * j)), V32I8)
                            for j in range(8)
                        ]
                    )
                    di = builder.add(builder.add(xdo_, builder.mul(nsb_, I64(c))), i)
                    yd.append(builder.load(builder.gep(dp, [di])))
                    bi = builder.add(
                        builder.add(bo_, builder.mul(nsb_, I64(16 * c))), builder.mul(i, I64(16))
                    )
                    bsv.append(
                        builder.load(
                            builder.bitcast(builder.gep(bp, [bi]), _V16I32.as_pointer()), align=4
                        )
                    )
                isums, dw = [], []
                for r in range(rows):
                    o = builder.add(
                        builder.add(off_, builder.mul(stride_, I64(r))),
                        builder.mul(i, I64(q.Q6_K_BYTES)),
                    )
                    for k in range(0, q.Q6_K_BYTES, 64):  # the same blocks `rows` rows ahead
                        p = builder.gep(wp, [builder.add(builder.add(o, ahead), I64(k))])
                        builder.call(pf, [p, I32(0), I32(3), I32(1)])
                    vals = q6k_values(builder, wp, o)
                    isums.append([q6k_isum(builder, vals, xv[c], bsv[c]) for c in range(cols)])
                    dw.append(load_half(builder, wp, builder.add(o, I64(208))))
                for gi, g in enumerate(groups):
                    s1 = _transpose_sums(builder, [isums[k % rows][k // rows] for k in g])
                    vd = ir.Constant(vf, ir.Undefined)
                    vy = ir.Constant(vf, ir.Undefined)
                    for lane, k in enumerate(g):
                        vd = builder.insert_element(vd, dw[k % rows], I32(lane))
                        vy = builder.insert_element(vy, yd[k // rows], I32(lane))
                    res = builder.fmul(vd, builder.sitofp(s1, vf))
                    builder.store(builder.call(fmav, [res, vy, builder.load(accs[gi])]), accs[gi])
            for gi, g in enumerate(groups):
                res = builder.load(accs[gi])
                for lane, k in enumerate(g):
                    c, r = divmod(k, rows)
                    oi = builder.add(builder.add(o_, I64(r)), builder.mul(ostep_, I64(c)))
                    builder.store(builder.extract_element(res, I32(lane)), builder.gep(op, [oi]))
            return context.get_dummy_value()

        return sig, codegen

    return dot
