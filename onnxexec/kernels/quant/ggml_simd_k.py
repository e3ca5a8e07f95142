"""Q4_K and Q6_K x Q8_K dot products written as AVX2 code, on the GGUF bytes as they are.

The orders are ggml_dot_k.dot_k's (see there for the llama.cpp sources). Every one of
them reduces integer products exactly before its first float step, so the integer
part runs here as vector code and the few float steps per super-block (and row) run
as scalar numba code with ggml_math.fma32, exactly as dot_k writes them:

- Q4_K, rows a multiple of 8 (llama.cpp repacks them, q4_K_8x8_q8_K): per 64-value
  chunk c of a super-block, the 32 low nibbles of qs[32c:32c + 32] are the values of
  sub-block 2c and the high nibbles those of sub-block 2c + 1; `_mm256_maddubs_epi16`
  with the activations, then `_mm256_madd_epi16` with the sub-block scale broadcast,
  give int32 sums of sc q x; their total over the super-block (gemv) or each chunk
  (gemm rows) is `tot`, the min term `tmin` comes from the bsums.
- Q6_K: per 32 values (ql nibble | qh bit pair << 4, unsigned 0..63) maddubs, then
  madd with the two 16-value scales (sign-extended int8) give 8 int32 lanes, lane l
  summing the values 4l..4l+3 of every 32; lane l loses 32 (sc[2l] bsums[2l] +
  sc[2l+1] bsums[2l+1]) (the -32 offset, as ggml_vec_dot_q6_K_q8_K). Below 8
  activation rows each lane goes to its own float accumulator (vec_dot), from 8 rows
  on their total does (ggml-cpu/tiled).

numba has no vector types: the integer parts are `@intrinsic`s emitting LLVM IR (as
ggml_simd.py), inlined into the numba row loops below. Whole groups of ROWS weight
rows of Q4_K (both orders) and of Q6_K in the tiled order run ggml_simd_ktile's
tiles instead (the horizontal sums of 8 outputs at once, float steps as vectors: same
bits, 1.2-3x faster); the per-output intrinsics here remain for Q6_K's vec_dot order
(WIDE weight rows per call for one activation row: decode) and single rows. Q4_K
weights whose row count is not a multiple of 8 (un-repacked in llama.cpp) are not
handled here (`simd_ok`).
"""

from __future__ import annotations

from typing import Any, Final

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from onnxexec.kernels.math.lanes import twins
from onnxexec.kernels.quant import ggml_simd
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_simd import (
    COLS,
    F32,
    I8,
    I16,
    I32,
    I64,
    ROWS,
    V8F32,
    V32I8,
    fn,
    hsum8,
    load_at,
    load_half,
    rows,
    splat8,
)
from onnxexec.kernels.quant.ggml_simd_ktile import (
    QK_K,
    arg_ptrs,
    madd,
    make_q4k_tile,
    make_q6k_tiled_tile,
    pair_sums,
    q4k_scales,
    q6k_isum,
    q6k_values,
    vconst,
)
from onnxexec.kernels.quant.vnni_q4k import PACKED_Q4_K, packed_rows

Q4_K_KIND: Final = 16  # kinds beside ggml_simd's (Q4_1 0, Q8_0 1, Q5_0 2)
Q6_K_KIND: Final = 17
PACKED_Q4_K_KIND: Final = 18  # vnni_q4k's repacked Q4_K (its PACKED_Q4_K pseudo type)
KINDS: Final = {q.Q4_K: Q4_K_KIND, q.Q6_K: Q6_K_KIND}  # ggml types only


def kind_of(t: int) -> int:
    """The kernel kind of a ggml type here or in ggml_simd, or of vnni_q4k's
    PACKED_Q4_K pseudo type (-1: none)."""
    if t == PACKED_Q4_K:
        return PACKED_Q4_K_KIND
    return ggml_simd.KINDS.get(t, KINDS.get(t, -1))


TILED_MIN_T: Final = 8  # ggml_dot_k.TILED_MIN_T (not imported: ggml_dot_k imports us)
WIDE: Final = 2 * ROWS  # weight rows per call for a single activation row

_V16I8 = ir.VectorType(I8, 16)
_V16I32 = ir.VectorType(I32, 16)


def simd_ok(ggml_type: int, n_rows: int) -> bool:
    """True when a (n_rows, K) weight of this type has a kernel here."""
    return ggml_type == q.Q6_K or (ggml_type == q.Q4_K and n_rows % 8 == 0)


def _hsum_i32(builder: ir.IRBuilder, v: Any, lanes: range = range(8)) -> Any:
    """The (exact) sum of v's int32 lanes `lanes`."""
    e = [builder.extract_element(v, I32(i)) for i in lanes]
    s = e[0]
    for x in e[1:]:
        s = builder.add(s, x)
    return s


def _make_k_dot(kind: int, rows: int, variant: bool, cols: int = 1) -> Any:
    """An intrinsic dot(w, off, stride, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep): for
    r < `rows` and c < `cols`, out[o + c ostep + r] = the product of the Q4_K / Q6_K
    weight row at byte off + r * stride of w (u8, nsb super-blocks) with the Q8_K
    activation row c: values x8[xo + c K:] (i8, K = 256 nsb), scales xd[xdo + c nsb:]
    (f32), bsums bs[bo + c K / 16:] (i32). `variant`: Q4_K's gemm order (per 64 values),
    Q6_K's tiled order. The `cols` rows share each weight block's loads and unpacking
    (the same values: LLVM computes them once); every output keeps its own float
    steps. Offsets index the flat data of C arrays."""
    bsize = q.Q4_K_BYTES if kind == Q4_K_KIND else q.Q6_K_BYTES

    @intrinsic
    def dot(typingctx, w, off, stride, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep):
        ip = types.intp
        sig = types.void(w, ip, ip, ip, x8, ip, xd, ip, bs, ip, out, ip, ip)

        def codegen(context, builder, signature, args):
            wp, xp, dp, bp, op = arg_ptrs(context, builder, signature, args, (0, 4, 6, 8, 10))
            off_, stride_, nsb_, _, xo_, _, xdo_, _, bo_, _, o_, ostep_ = args[1:]
            fma8 = fn(builder, "llvm.fma.v8f32", V8F32, [V8F32] * 3)
            fma1 = fn(builder, "llvm.fma.f32", F32, [F32] * 3)
            pf = fn(builder, "llvm.prefetch.p0", ir.VoidType(), [wp.type, I32, I32, I32])
            if kind == Q6_K_KIND and not variant:
                zero = ir.Constant(V8F32, [0.0] * 8)
            else:
                zero = F32(0.0)
            rc = [(r, c) for r in range(rows) for c in range(cols)]
            accs = {k: cgutils.alloca_once_value(builder, zero) for k in rc}
            accms = {k: cgutils.alloca_once_value(builder, F32(0.0)) for k in rc}
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
                    bsp = builder.gep(bp, [bi])
                    bsv.append(builder.load(builder.bitcast(bsp, _V16I32.as_pointer()), align=4))
                for r in range(rows):
                    o = builder.add(
                        builder.add(off_, builder.mul(stride_, I64(r))),
                        builder.mul(i, I64(bsize)),
                    )
                    for k in range(0, bsize, 64):  # the same blocks `rows` rows ahead
                        p = builder.gep(wp, [builder.add(builder.add(o, ahead), I64(k))])
                        builder.call(pf, [p, I32(0), I32(3), I32(1)])
                    for c in range(cols):
                        if kind == Q4_K_KIND:
                            _q4k_block(
                                builder,
                                wp,
                                o,
                                xv[c],
                                yd[c],
                                bsv[c],
                                accs[r, c],
                                accms[r, c],
                                variant,
                                fma1,
                            )
                        else:
                            _q6k_block(
                                builder,
                                wp,
                                o,
                                xv[c],
                                yd[c],
                                bsv[c],
                                accs[r, c],
                                variant,
                                fma1,
                                fma8,
                            )
            for r, c in rc:
                acc = builder.load(accs[r, c])
                if kind == Q4_K_KIND:
                    res = builder.fsub(acc, builder.load(accms[r, c]))
                elif variant:
                    res = acc
                else:
                    res = hsum8(builder, acc)
                oi = builder.add(builder.add(o_, I64(r)), builder.mul(ostep_, I64(c)))
                builder.store(res, builder.gep(op, [oi]))
            return context.get_dummy_value()

        return sig, codegen

    return dot


def _q4k_block(builder, wp, o, xv, yd, bsv, acc_p, accm_p, gemm, fma1) -> None:
    """One Q4_K super-block of one row into its (acc, accm) (see the module docstring)."""
    sc, mn = q4k_scales(builder, wp, o)
    sc16 = builder.trunc(sc, ir.VectorType(I16, 8))
    dd = builder.fmul(load_half(builder, wp, o), yd)
    dm = builder.fmul(load_half(builder, wp, builder.add(o, I64(2))), yd)
    mins = builder.mul(mn, pair_sums(builder, bsv))  # lane j: min_j (bsums 2j + 2j+1)
    undef8 = ir.Constant(ir.VectorType(I16, 8), ir.Undefined)
    parts = []
    for c in range(4):
        qb = load_at(builder, wp, builder.add(o, I64(16 + 32 * c)), V32I8)
        s_lo = builder.shuffle_vector(sc16, undef8, ir.Constant(_V16I32, [2 * c] * 16))
        s_hi = builder.shuffle_vector(sc16, undef8, ir.Constant(_V16I32, [2 * c + 1] * 16))
        lo = madd(builder, builder.and_(qb, vconst(V32I8, 15)), xv[2 * c], s_lo)
        hi = madd(builder, builder.lshr(qb, vconst(V32I8, 4)), xv[2 * c + 1], s_hi)
        parts.append(builder.add(lo, hi))
    if gemm:  # per 64 values: acc, accm updated four times
        for c in range(4):
            tot = _hsum_i32(builder, parts[c])
            tmin = _hsum_i32(builder, mins, range(2 * c, 2 * c + 2))
            _fma_to(builder, fma1, tot, dd, acc_p)
            _fma_to(builder, fma1, tmin, dm, accm_p)
        return
    tot = _hsum_i32(
        builder, builder.add(builder.add(parts[0], parts[1]), builder.add(parts[2], parts[3]))
    )
    _fma_to(builder, fma1, tot, dd, acc_p)
    _fma_to(builder, fma1, _hsum_i32(builder, mins), dm, accm_p)


def _fma_to(builder: ir.IRBuilder, fma1: Any, isum: Any, d: Any, acc_p: Any) -> None:
    """*acc_p = fma(float(isum), d, *acc_p)."""
    v = builder.call(fma1, [builder.sitofp(isum, F32), d, builder.load(acc_p)])
    builder.store(v, acc_p)


def _q6k_block(builder, wp, o, xv, yd, bsv, acc_p, tiled, fma1, fma8) -> None:
    """One Q6_K super-block of one row into its accumulator (8 lanes, or one if tiled)."""
    isum = q6k_isum(builder, q6k_values(builder, wp, o), xv, bsv)
    dw = load_half(builder, wp, builder.add(o, I64(208)))
    if tiled:
        res = builder.fmul(dw, builder.sitofp(_hsum_i32(builder, isum), F32))
        builder.store(builder.call(fma1, [res, yd, builder.load(acc_p)]), acc_p)
        return
    d = splat8(builder, builder.fmul(yd, dw))
    builder.store(builder.call(fma8, [d, builder.sitofp(isum, V8F32), builder.load(acc_p)]), acc_p)


_K_DOTS = {
    (kind, r, v, c): _make_k_dot(kind, r, v, c)
    for kind in (Q4_K_KIND, Q6_K_KIND)
    for r in (ROWS, 1)
    for v in (False, True)
    for c in (COLS, 1)
    # whole row groups of Q4_K and of tiled Q6_K take the tiles below (ggml_simd_ktile)
    if (kind == Q6_K_KIND and (r == 1 or not v)) or (r == 1 and c == 1)
}

# Q4_K over ROWS weight rows (ggml_simd_ktile): COLS activation rows of the gemm order,
# one row of the gemm order (cols = 1, A/B only), one row of the gemv order
_Q4K_GEMM_RC = make_q4k_tile(ROWS, COLS, True)
_Q4K_GEMM_R1 = make_q4k_tile(ROWS, 1, True)
_Q4K_GEMV_R1 = make_q4k_tile(ROWS, 1, False)
_K_DOTS_Q4K_11 = _K_DOTS[Q4_K_KIND, 1, False, 1]
_K_DOTS_Q4K_GEMM_11 = _K_DOTS[Q4_K_KIND, 1, True, 1]
_K_DOTS_Q6K_RC = _K_DOTS[Q6_K_KIND, ROWS, False, COLS]
_K_DOTS_Q6K_R1 = _K_DOTS[Q6_K_KIND, ROWS, False, 1]
_K_DOTS_Q6K_1C = _K_DOTS[Q6_K_KIND, 1, False, COLS]
_K_DOTS_Q6K_11 = _K_DOTS[Q6_K_KIND, 1, False, 1]
_K_DOTS_Q6K_TILED_RC = make_q6k_tiled_tile(ROWS, COLS)
_K_DOTS_Q6K_TILED_R1 = make_q6k_tiled_tile(ROWS, 1)
_K_DOTS_Q6K_TILED_1C = _K_DOTS[Q6_K_KIND, 1, True, COLS]
_K_DOTS_Q6K_TILED_11 = _K_DOTS[Q6_K_KIND, 1, True, 1]
# Q6_K, one activation row (decode) in the vec_dot order: WIDE weight rows per call
# share the activation loads (1.2x; Q4_K's 8-row gemv tile ran slower than its 4-row)
_K_DOTS_Q6K_W1 = _make_k_dot(Q6_K_KIND, WIDE, False, 1)


@nb.njit(cache=True, nogil=True, inline="always")
def _k_dot(kind, variant, full, multi, w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep):
    """The intrinsic of (kind, variant, ROWS or 1 weight rows, COLS or 1 activation
    rows) on the other arguments."""
    if kind == Q4_K_KIND:  # multi: only with full and variant (the gemm rows)
        if variant:
            if multi:
                _Q4K_GEMM_RC(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
            elif full:
                _Q4K_GEMM_R1(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
            else:
                _K_DOTS_Q4K_GEMM_11(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
        elif full:
            _Q4K_GEMV_R1(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
        else:
            _K_DOTS_Q4K_11(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
    elif variant:
        if full:
            if multi:
                _K_DOTS_Q6K_TILED_RC(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
            else:
                _K_DOTS_Q6K_TILED_R1(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
        elif multi:
            _K_DOTS_Q6K_TILED_1C(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
        else:
            _K_DOTS_Q6K_TILED_11(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
    elif full:
        if multi:
            _K_DOTS_Q6K_RC(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
        else:
            _K_DOTS_Q6K_R1(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
    elif multi:
        _K_DOTS_Q6K_1C(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)
    else:
        _K_DOTS_Q6K_11(w, off, rb, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep)


@nb.njit(cache=True, nogil=True, inline="always")
def k_rows(raw, rb, kind, xk8, xkd, xkbs, rows4, out, col0, n0, n1, cols):
    """out[t, col0 + n] for the weight rows n in [n0, n1) of a Q4_K / Q6_K weight (GGUF
    bytes raw, rb per row) and every activation row t; x as Q8_K with int8 values
    (rows t < rows4 take the repacked Q4_K's gemm order; Q6_K from TILED_MIN_T rows
    on the tiled order). COLS activation rows per call when cols >= COLS (never
    across rows4: rows4 is a multiple of 4)."""
    T, K = xk8.shape
    N = out.shape[1]
    nsb = K // QK_K
    tiled = T >= TILED_MIN_T
    r = n0
    if T == 1 and kind == Q6_K_KIND:  # decode: WIDE rows per call, then the loop below
        while r + WIDE <= n1:
            _K_DOTS_Q6K_W1(raw, r * rb, rb, nsb, xk8, 0, xkd, 0, xkbs, 0, out, col0 + r, N)
            r += WIDE
    while r < n1:
        full = r + ROWS <= n1
        t = 0
        while t < T:
            multi = cols >= COLS and t + COLS <= T and (t >= rows4 or t + COLS <= rows4)
            if kind == Q4_K_KIND:  # its COLS-row tiles: whole row groups, gemm rows only
                multi = multi and full and t < rows4
            variant = t < rows4 if kind == Q4_K_KIND else tiled
            _k_dot(
                kind,
                variant,
                full,
                multi,
                raw,
                r * rb,
                rb,
                nsb,
                xk8,
                t * K,
                xkd,
                t * nsb,
                xkbs,
                t * (K // 16),
                out,
                t * N + col0 + r,
                N,
            )
            t += COLS if multi else 1
        r += ROWS if full else 1


@nb.njit(cache=True, nogil=True, inline="always")
def row_groups(raws, row_bytes):
    """(nw + 1,) cumulative counts of ROWS-row groups of the weights: the one range
    that _dot_many cuts into chunks."""
    nw = len(raws)
    gs = np.zeros(nw + 1, np.int64)
    for i in range(nw):
        gs[i + 1] = gs[i] + -(-(raws[i].shape[0] // row_bytes[i]) // ROWS)
    return gs


@nb.njit(cache=True, nogil=True, inline="always")
def dot_chunk(
    raws, row_bytes, kinds, col0s, x8, xst, xk8, xkd, xkbs, rows4, out, gs, n_chunks, c, cols
):
    """Chunk c of n_chunks of _dot_many (gs from row_groups): the rows of groups
    [c*total/n_chunks, (c+1)*total/n_chunks) of every weight they fall in."""
    total = gs[len(raws)]
    g0 = c * total // n_chunks
    g1 = (c + 1) * total // n_chunks
    for i in range(len(raws)):
        a = max(g0, gs[i])
        b = min(g1, gs[i + 1])
        if a < b:
            n = raws[i].shape[0] // row_bytes[i]
            n0 = (a - gs[i]) * ROWS
            n1 = min(n, (b - gs[i]) * ROWS)
            if kinds[i] == PACKED_Q4_K_KIND:  # whole 8-row groups (n % 8 == 0)
                packed_rows(raws[i], row_bytes[i], xk8, xkd, xkbs, rows4, out, col0s[i],
                            -(-n0 // 8) * 8, -(-n1 // 8) * 8)  # fmt: skip
            elif kinds[i] >= Q4_K_KIND:
                k_rows(raws[i], row_bytes[i], kinds[i], xk8, xkd, xkbs, rows4, out, col0s[i],
                       n0, n1, cols)  # fmt: skip
            else:
                rows(raws[i], row_bytes[i], kinds[i], x8, xst, out, col0s[i], n0, n1, cols)


def _dot_many(
    raws, row_bytes, kinds, col0s, x8, xst, xk8, xkd, xkbs, rows4, out, n_chunks, cols=COLS
):
    """ggml_simd._dot_many over weights of any kind here or in ggml_simd: block kinds
    read x8 / xst (quantize_act8), K kinds xk8 / xkd / xkbs (Q8_K, int8 values; rows
    below rows4 take the repacked Q4_K's gemm order). All rows K = x8.shape[1] long."""
    gs = row_groups(raws, row_bytes)
    n_chunks = max(1, min(gs[len(raws)], n_chunks))
    for c in nb.prange(n_chunks):
        dot_chunk(raws, row_bytes, kinds, col0s, x8, xst, xk8, xkd, xkbs, rows4, out, gs,
                  n_chunks, c, cols)  # fmt: skip


DOT_MANY = twins(_dot_many)
"""(parallel, serial) kernels of `_dot_many` (lanes.pick chooses)."""
