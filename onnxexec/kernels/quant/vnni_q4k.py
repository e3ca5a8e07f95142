"""Q4_K x Q8_K on AVX-512 VNNI hosts: weights repacked 8 rows wide, one row per lane.

ggml_simd_ktile computes each output's integer totals in lanes of 4-value sums and
then transposes groups of 8 outputs' lane vectors into one (shuffles and adds that
cost as much as the products). Here the weight is repacked once at load, like
llama.cpp's block_q4_Kx8 (repack.cpp), so that one 32-byte load holds the same 4
consecutive values of 8 rows (4 bytes per row, in row order): `vpdpbusd` of those
against the activation's 4 bytes broadcast gives every row's 4-value sum in its own
lane, summed over a 32-value sub-block in the accumulator (exact int32), with no
transpose. The sub-block scales and mins are per-lane vectors (vpmulld), and the float
steps are those of ggml_simd_ktile per lane, in the same order: per 64 values (gemm
rows, t < rows4) or per super-block (gemv rows: decode and the rows past rows4),
acc = fma(float(tot), f32(half(d) x.d), acc), accm = fma(float(tmin), f32(half(dmin)
x.d), accm), out = acc - accm. Integer sums are exact in any order, so the outputs are
the same bits as ggml_simd_k's (and llama.cpp's repacked q4_K_8x8_q8_K).

Layout (`repack`): per group of 8 rows and super-block i, 1152 bytes (= 8 x 144, so
the packed array has the GGUF bytes' size and row stride):
    [0:16] d (8 halves), [16:32] dmin (8 halves),
    [32:96] byte 8j + r = (sc_j & 15) | (min_j & 15) << 4    (sub-block j, row r)
    [96:128] byte 8c + r = the top 2 bits of sc_2c, min_2c, sc_2c+1, min_2c+1
    [128:1152] byte 256c + 32s + 4r + b = GGUF qs[32c + 4s + b] of row r
               (low nibble: sub-block 2c, high nibble: 2c + 1, value 4s + b).
"""

from __future__ import annotations

from typing import Any, Final

import numba as nb
import numpy as np
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
    V8F32,
    V8I32,
    V32I8,
    VNNI,
    fn,
    load_at,
    splat8,
    vnni_sums,
)

QK_K: Final = 256
GROUP: Final = 8  # weight rows per packed group (one per int32 lane of a ymm register)
COLS: Final = 4  # gemm activation rows per call (the repacked gemm's 4-row groups)
GB: Final = GROUP * q.Q4_K_BYTES  # packed bytes per group and super-block (1152)
PACKED_Q4_K: Final = 0x1000 | q.Q4_K
"""Pseudo ggml type of a `repack`ed Q4_K weight in the (bytes, row bytes, type)
triples of ggml_dot.simd_dot_many (qmatmul.simd_operand hands it out)."""
ENABLED: Final = VNNI


def packable(ggml_type: int, n_rows: int) -> bool:
    """True when a (n_rows, K) weight of this type is repacked on this host."""
    return ENABLED and int(ggml_type) == q.Q4_K and n_rows % GROUP == 0


def repack(raw: np.ndarray, n: int, k: int) -> np.ndarray:
    """The GGUF bytes of a (n, k) Q4_K weight (n % 8 == 0) in the layout above (a new
    uint8 array of the same size)."""
    nsb = k // QK_K
    w = np.asarray(raw, np.uint8).reshape(n // GROUP, GROUP, nsb, q.Q4_K_BYTES)
    w = w.transpose(0, 2, 1, 3)  # (group, super-block, row, bytes)
    out = np.empty((n // GROUP, nsb, GB), np.uint8)
    halves = w[..., 0:4].reshape(n // GROUP, nsb, GROUP, 2, 2)  # (.., row, d / dmin, byte)
    out[..., 0:32] = halves.transpose(0, 1, 3, 2, 4).reshape(n // GROUP, nsb, 32)
    s = w[..., 4:16].astype(np.int32)  # get_scale_min_k4 for all 8 sub-blocks
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 15) | ((s[..., 0:4] >> 6) << 4)], -1)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], -1)
    nib = (sc & 15) | ((mn & 15) << 4)  # (group, sb, row, j)
    out[..., 32:96] = nib.transpose(0, 1, 3, 2).reshape(n // GROUP, nsb, 64)
    top = (sc >> 4)[..., 0::2] | ((mn >> 4)[..., 0::2] << 2)
    top |= ((sc >> 4)[..., 1::2] << 4) | ((mn >> 4)[..., 1::2] << 6)
    out[..., 96:128] = top.transpose(0, 1, 3, 2).reshape(n // GROUP, nsb, 32)
    qs = w[..., 16:].reshape(n // GROUP, nsb, GROUP, 4, 8, 4)  # (.., row, c, s, b)
    out[..., 128:] = qs.transpose(0, 1, 3, 4, 2, 5).reshape(n // GROUP, nsb, 1024)
    return out.reshape(-1)


def _c8(v: int) -> Any:
    return ir.Constant(V8I32, [v] * 8)


def _splat_i(builder: ir.IRBuilder, v: Any) -> Any:
    """An i32 in all 8 lanes."""
    return builder.bitcast(splat8(builder, builder.bitcast(v, F32)), V8I32)


def _halves8(builder: ir.IRBuilder, wp: Any, off: Any) -> Any:
    """8 little-endian halves at byte off, as <8 x float> (vcvtph2ps: exact)."""
    h = load_at(builder, wp, off, ir.VectorType(I16, 8))
    return builder.fpext(builder.bitcast(h, ir.VectorType(ir.HalfType(), 8)), V8F32)


def _scales(builder: ir.IRBuilder, wp: Any, base: Any, c: int) -> tuple[Any, ...]:
    """(sc_2c, min_2c, sc_2c+1, min_2c+1) of the group's 8 rows, <8 x i32> each."""
    v8 = ir.VectorType(I8, 8)

    def bytes_at(o: int) -> Any:
        return builder.zext(load_at(builder, wp, builder.add(base, I64(o)), v8), V8I32)

    top = bytes_at(96 + 8 * c)
    out = []
    for h in range(2):
        nib = bytes_at(32 + 8 * (2 * c + h))
        for part in range(2):  # scale (low nibble), min (high nibble)
            lo = builder.and_(builder.lshr(nib, _c8(4 * part)), _c8(15))
            hi = builder.and_(builder.lshr(top, _c8(4 * h + 2 * part)), _c8(3))
            out.append(builder.or_(lo, builder.shl(hi, _c8(4))))
    return tuple(out)


def _make_tile(cols: int, gemm: bool) -> Any:
    """An intrinsic dot(pk, off, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep): the 8
    rows of the packed group at byte off of pk x `cols` activation rows c (Q8_K: int8
    values x8[xo + c K:], scales xd[xdo + c nsb:], bsums bs[bo + 16 c nsb:]) into
    out[o + c ostep + r], r < 8. `gemm`: the per-64-values order, else per super-block."""

    @intrinsic
    def dot(typingctx, pk, off, nsb, x8, xo, xd, xdo, bs, bo, out, o, ostep):
        ip = types.intp
        sig = types.void(pk, ip, ip, x8, ip, xd, ip, bs, ip, out, ip, ip)

        def codegen(context, builder, signature, args):
            def data(i: int) -> Any:
                return context.make_array(signature.args[i])(context, builder, args[i]).data

            wp, xp, dp, bp, op = data(0), data(3), data(5), data(7), data(9)
            _, off_, nsb_, _, xo_, _, xdo_, _, bo_, _, o_, ostep_ = args
            fma8 = fn(builder, "llvm.fma.v8f32", V8F32, [V8F32] * 3)
            zero = ir.Constant(V8F32, [0.0] * 8)
            accs = [cgutils.alloca_once_value(builder, zero) for _ in range(cols)]
            accms = [cgutils.alloca_once_value(builder, zero) for _ in range(cols)]
            kstep = builder.mul(nsb_, I64(QK_K))

            def fma_to(isum: Any, d: Any, acc_p: Any) -> None:
                v = builder.call(fma8, [builder.sitofp(isum, V8F32), d, builder.load(acc_p)])
                builder.store(v, acc_p)

            with cgutils.for_range(builder, nsb_) as loop:
                i = loop.index
                base = builder.add(off_, builder.mul(i, I64(GB)))
                dw = _halves8(builder, wp, base)
                dmw = _halves8(builder, wp, builder.add(base, I64(16)))
                xrow, dd, dm, brow = [], [], [], []
                for c in range(cols):
                    xrow.append(
                        builder.add(
                            builder.add(xo_, builder.mul(kstep, I64(c))),
                            builder.mul(i, I64(QK_K)),
                        )
                    )
                    di = builder.add(builder.add(xdo_, builder.mul(nsb_, I64(c))), i)
                    yd = splat8(builder, builder.load(builder.gep(dp, [di])))
                    dd.append(builder.fmul(dw, yd))
                    dm.append(builder.fmul(dmw, yd))
                    brow.append(
                        builder.add(
                            builder.add(bo_, builder.mul(nsb_, I64(16 * c))),
                            builder.mul(i, I64(16)),
                        )
                    )
                tots: list[Any] = [None] * cols
                tmins: list[Any] = [None] * cols
                for ch in range(4):
                    sc0, mn0, sc1, mn1 = _scales(builder, wp, base, ch)
                    a0: list[Any] = [None] * cols
                    a1: list[Any] = [None] * cols
                    for s in range(8):
                        qo = builder.add(base, I64(128 + 256 * ch + 32 * s))
                        wq = load_at(builder, wp, qo, V32I8)
                        lo = builder.and_(wq, ir.Constant(V32I8, [15] * 32))
                        hi = builder.lshr(wq, ir.Constant(V32I8, [4] * 32))
                        for c in range(cols):
                            xo = builder.add(xrow[c], I64(64 * ch + 4 * s))
                            xl = _splat_i(builder, load_at(builder, xp, xo, I32))
                            xh = load_at(builder, xp, builder.add(xo, I64(32)), I32)
                            xh = _splat_i(builder, xh)
                            a0[c] = vnni_sums(builder, lo, builder.bitcast(xl, V32I8), a0[c])
                            a1[c] = vnni_sums(builder, hi, builder.bitcast(xh, V32I8), a1[c])
                    for c in range(cols):
                        tot = builder.add(builder.mul(a0[c], sc0), builder.mul(a1[c], sc1))
                        bsp = []
                        for j in (2 * ch, 2 * ch + 1):  # bsums of sub-block j's 32 values
                            b0 = builder.load(builder.gep(bp, [builder.add(brow[c], I64(2 * j))]))
                            b1 = builder.load(
                                builder.gep(bp, [builder.add(brow[c], I64(2 * j + 1))])
                            )
                            bsp.append(_splat_i(builder, builder.add(b0, b1)))
                        tmin = builder.add(builder.mul(mn0, bsp[0]), builder.mul(mn1, bsp[1]))
                        if gemm:
                            fma_to(tot, dd[c], accs[c])
                            fma_to(tmin, dm[c], accms[c])
                        else:
                            tots[c] = tot if tots[c] is None else builder.add(tots[c], tot)
                            tmins[c] = tmin if tmins[c] is None else builder.add(tmins[c], tmin)
                if not gemm:
                    for c in range(cols):
                        fma_to(tots[c], dd[c], accs[c])
                        fma_to(tmins[c], dm[c], accms[c])
            for c in range(cols):
                res = builder.fsub(builder.load(accs[c]), builder.load(accms[c]))
                oi = builder.add(o_, builder.mul(ostep_, I64(c)))
                builder.store(res, builder.bitcast(builder.gep(op, [oi]), V8F32.as_pointer()), 4)
            return context.get_dummy_value()

        return sig, codegen

    return dot


_GEMM = _make_tile(COLS, True)
_GEMV = _make_tile(1, False)


@nb.njit(cache=True, nogil=True, inline="always")
def packed_rows(pk, rb, xk8, xkd, xkbs, rows4, out, col0, n0, n1):
    """out[t, col0 + n] for the rows n in [n0, n1) (multiples of 8, or n1 = the row
    count) of a `repack`ed Q4_K weight (rb GGUF bytes per row) and every activation
    row t (Q8_K, int8 values): rows t < rows4 (a multiple of 4) in the gemm order, the
    rest in the gemv order."""
    T, K = xk8.shape
    N = out.shape[1]
    nsb = K // QK_K
    for g in range(n0 // GROUP, (n1 + GROUP - 1) // GROUP):
        off = g * GROUP * rb
        for t in range(0, rows4, COLS):
            _GEMM(pk, off, nsb, xk8, t * K, xkd, t * nsb, xkbs, t * (K // 16),
                  out, t * N + col0 + g * GROUP, N)  # fmt: skip
        for t in range(rows4, T):
            _GEMV(pk, off, nsb, xk8, t * K, xkd, t * nsb, xkbs, t * (K // 16),
                  out, t * N + col0 + g * GROUP, N)  # fmt: skip
