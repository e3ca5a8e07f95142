"""Exact 8-bit integer GEMM: (A - za) (W - zw) in int32, W packed once.

A is uint8 (an int8 A is shifted by +128 first), W int8 (a uint8 W is shifted by
-128 when packed); the shifts and the zero points come back as rank-1 corrections
(`finish_int32` / `finish_float`), so the inner product is the raw u8 x s8 dot
product that x86's VNNI `vpdpbusd` computes (Intel SDM, VPDPBUSD: four u8 * s8
products summed into each int32 lane, no saturation), exactly as onnxruntime's MLAS
QGEMM kernels do (mlas/lib/qgemm_kernel_avx512vnni.cpp and its zero-point
corrections in qgemm.h).

Packed layout (`pack`): W (K, N) becomes panels of 16 columns, K padded to a
multiple of 4 and N to a multiple of 32 with zeros, bytes ordered
[panel][k / 4][column in panel][k % 4]: one 64-byte load is the 4 x 16 block one
vpdpbusd multiplies with four bytes of an A row broadcast to every lane.

Kernels, chosen once from kernels/isa.py (so ONNXEXEC_ISA caps them): `_tile_<rows>`
(VNNI, an @intrinsic emitting llvm.x86.avx512.vpdpbusd.512 for `rows` A rows x 32
columns, accumulators in registers) when avx512_vnni is allowed; else `_avx2_<rows>`
(AVX2: bytes widened to int16 and multiplied by vpmaddwd, exact; vpmaddubsw is not
used because its int16 pair sums saturate at 2 * 255 * -128); else `_tiles_portable`,
numba loops over the same layout in int32 (exact on any CPU). Sums are exact while
K * 255 * 128 < 2^31 (K < 65793).
"""

from __future__ import annotations

from typing import Any, Final

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from onnxexec.kernels.isa import has
from onnxexec.kernels.linalg.igemm_avx2 import tiles_avx2 as _tiles_avx2

PANEL: Final = 16  # int32 lanes of one zmm: columns per panel
PAIR: Final = 2 * PANEL  # columns per tile (two panels)
MR: Final = 6  # A rows per tile: 12 accumulators + 2 weight registers of 32
VNNI: Final = not nb.config.DISABLE_JIT and has("avx512f", "avx512bw", "avx512_vnni")
AVX2: Final = not nb.config.DISABLE_JIT and has("avx2")

_I8, _I32, _I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_V16I32 = ir.VectorType(_I32, 16)


def _make_tile(rows: int) -> Any:
    """An intrinsic tile(a, ao, lda, wp, wo, k4s, c, co, ldc): for r < rows and the 32
    columns of the two panels at byte wo and wo + 64 k4s of wp (i8),
    c[co + r ldc + j] = sum over k < 4 k4s of a[ao + r lda + k] (u8) times the packed
    weight; offsets index the flat data of C-contiguous arrays (c int32)."""

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
            dp = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(_V16I32, [_V16I32] * 3),
                "llvm.x86.avx512.vpdpbusd.512",
            )
            zero = ir.Constant(_V16I32, [0] * 16)
            accs = [
                [cgutils.alloca_once_value(builder, zero) for _ in range(2)] for _ in range(rows)
            ]
            second = builder.mul(k4s_, _I64(64))
            with cgutils.for_range(builder, k4s_) as loop:
                k4 = loop.index
                wv = []
                for p in range(2):
                    off = builder.add(
                        builder.add(wo_, builder.mul(k4, _I64(64))), builder.mul(second, _I64(p))
                    )
                    ptr = builder.bitcast(builder.gep(wpp, [off]), _V16I32.as_pointer())
                    wv.append(builder.load(ptr, align=1))
                for r in range(rows):
                    off = builder.add(
                        builder.add(ao_, builder.mul(lda_, _I64(r))), builder.mul(k4, _I64(4))
                    )
                    ptr = builder.bitcast(builder.gep(ap, [off]), _I32.as_pointer())
                    four = builder.load(ptr, align=1)  # a[k..k+3] as one i32
                    u = builder.insert_element(ir.Constant(_V16I32, ir.Undefined), four, _I32(0))
                    splat = builder.shuffle_vector(u, u, ir.Constant(_V16I32, [0] * 16))
                    for p in range(2):
                        acc = builder.call(dp, [builder.load(accs[r][p]), splat, wv[p]])
                        builder.store(acc, accs[r][p])
            for r in range(rows):
                for p in range(2):
                    off = builder.add(builder.add(co_, builder.mul(ldc_, _I64(r))), _I64(PANEL * p))
                    ptr = builder.bitcast(builder.gep(cp, [off]), _V16I32.as_pointer())
                    builder.store(builder.load(accs[r][p]), ptr, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return tile


_tile_1, _tile_2, _tile_3, _tile_4, _tile_5, _tile_6 = (_make_tile(r) for r in range(1, MR + 1))


@nb.njit(cache=True, nogil=True)
def _tiles_vnni(a, lda, m, k4s, wp, c, ldc, t0, t1):  # pragma: no cover - numba
    """c[:m, 32 t0 : 32 t1] = a (m rows of lda bytes) times tiles t0..t1 of wp."""
    for t in range(t0, t1):
        wo = t * 2 * k4s * 64
        r = 0
        while r < m:
            n = min(MR, m - r)
            ao = r * lda
            co = r * ldc + t * PAIR
            if n == 6:
                _tile_6(a, ao, lda, wp, wo, k4s, c, co, ldc)
            elif n == 5:
                _tile_5(a, ao, lda, wp, wo, k4s, c, co, ldc)
            elif n == 4:
                _tile_4(a, ao, lda, wp, wo, k4s, c, co, ldc)
            elif n == 3:
                _tile_3(a, ao, lda, wp, wo, k4s, c, co, ldc)
            elif n == 2:
                _tile_2(a, ao, lda, wp, wo, k4s, c, co, ldc)
            else:
                _tile_1(a, ao, lda, wp, wo, k4s, c, co, ldc)
            r += n


@nb.njit(cache=True, nogil=True)
def _tiles_portable(a, lda, m, k4s, wp, c, ldc, t0, t1):  # pragma: no cover - numba
    """`_tiles_vnni` in plain int32 loops (any CPU)."""
    acc = np.empty(PANEL, np.int32)
    for p in range(2 * t0, 2 * t1):
        base = p * k4s * 64
        for r in range(m):
            acc[:] = 0
            for k4 in range(k4s):
                ab = r * lda + 4 * k4
                a0, a1 = np.int32(a[ab]), np.int32(a[ab + 1])
                a2, a3 = np.int32(a[ab + 2]), np.int32(a[ab + 3])
                wb = base + k4 * 64
                for j in range(PANEL):
                    w = wb + 4 * j
                    acc[j] += a0 * wp[w] + a1 * wp[w + 1] + a2 * wp[w + 2] + a3 * wp[w + 3]
            for j in range(PANEL):
                c[r * ldc + p * PANEL + j] = acc[j]


def tiles(
    a: np.ndarray,
    lda: int,
    m: int,
    k4s: int,
    wp: np.ndarray,
    c: np.ndarray,
    ldc: int,
    t0: int,
    t1: int,
) -> None:
    """c (flat int32, rows of ldc) columns 32 t0 .. 32 t1 of the raw product of the flat
    uint8 `a` (m rows of lda bytes, lda a multiple of 4 >= 4 k4s) with packed `wp`.
    Releases the GIL (the ops layer splits t0..t1 over threads)."""
    _LOOPS[LOOP](a, lda, m, k4s, wp, c, ldc, t0, t1)


_LOOPS: Final = {"vnni": _tiles_vnni, "avx2": _tiles_avx2, "portable": _tiles_portable}
# the loop `tiles` runs (read on every call: tests switch it)
LOOP = "vnni" if VNNI else "avx2" if AVX2 else "portable"
# the jitted tile loop for this CPU (arguments as `tiles`), for kernels that call it
# from numba: a global there, frozen at their compile time like the ISA gate itself
TILE_LOOP: Final = _LOOPS[LOOP]


def pack(w: np.ndarray) -> tuple[np.ndarray, int]:
    """(packed int8 bytes, shift): W (K, N) int8 or uint8 in the module's layout, shift
    128 for uint8 (packed as W - 128) and 0 for int8."""
    k, n = w.shape
    shift = 128 if w.dtype == np.uint8 else 0
    # uint8 v - 128 is v ^ 0x80 read as int8: no widened copy of a large weight
    ws = (w ^ np.uint8(0x80)).view(np.int8) if shift else w.view(np.int8)
    kp, np_ = -(-k // 4) * 4, -(-n // PAIR) * PAIR
    full = np.zeros((kp, np_), np.int8)
    full[:k, :n] = ws
    # (K/4, 4, P, 16) -> (P, K/4, 16, 4)
    out = full.reshape(kp // 4, 4, np_ // PANEL, PANEL).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(out).reshape(-1), shift


@nb.njit(cache=True, nogil=True)
def _row_sums(a, lda, m, k):  # pragma: no cover - numba
    s = np.empty(m, np.int64)
    for r in range(m):
        t = np.int32(0)  # an int32 sum of bytes vectorizes (k * 255 < 2^31)
        for i in range(k):
            t += np.int32(a[r * lda + i])
        s[r] = t
    return s


@nb.njit(cache=True, nogil=True)
def _im2col_nhwc(x, zx, geo, out, lda, p0, p1):  # pragma: no cover - numba
    """Rows p0..p1 of the im2col matrix of x (N, H, W, C): row (n, oy, ox) holds the
    window's bytes in (ky, kx, c) order, zx where the window leaves x, zeros past
    KH KW C up to lda. geo = (kh, kw, sh, sw, dh, dw, ph, pw, oh, ow)."""
    kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    h, w, c = x.shape[1], x.shape[2], x.shape[3]
    xf = x.reshape(-1)
    per = oh * ow
    used = kh * kw * c
    fill = np.full(c, zx, np.uint8)
    for p in range(p0, p1):
        n, q = p // per, p % per
        oy, ox = q // ow, q % ow
        base = p * lda
        for ky in range(kh):
            iy = oy * sh - ph + ky * dh
            for kx in range(kw):
                ix = ox * sw - pw + kx * dw
                o = base + (ky * kw + kx) * c
                if 0 <= iy < h and 0 <= ix < w:
                    src = ((n * h + iy) * w + ix) * c
                    out[o : o + c] = xf[src : src + c]  # slices: one copy, no index checks
                else:
                    out[o : o + c] = fill
        out[base + used : base + lda] = 0


def im2col_nhwc(
    x: np.ndarray, zx: int, geo: np.ndarray, out: np.ndarray, lda: int, p0: int, p1: int
) -> None:
    """Rows p0..p1 of a 2-D conv's im2col matrix (see `_im2col_nhwc`) into flat out."""
    _im2col_nhwc(x, zx, geo, out, lda, p0, p1)


@nb.njit(cache=True, nogil=True)
def _finish_float(c, ldc, rows, zw, colterm, mult, bias, out, r0, r1):  # pragma: no cover
    """out[r, j] = float32(int32 result) * mult[j] + bias[j] for rows r0..r1."""
    n = out.shape[1]
    for r in range(r0, r1):
        rs = rows[r]
        for j in range(n):
            v = np.int64(c[r * ldc + j]) - zw[j] * rs + colterm[j]
            out[r, j] = np.float32(v) * mult[j] + bias[j]


@nb.njit(cache=True, nogil=True)
def _finish_int32(c, ldc, rows, zw, colterm, out, r0, r1):  # pragma: no cover
    n = out.shape[1]
    for r in range(r0, r1):
        rs = rows[r]
        for j in range(n):
            out[r, j] = np.int32(np.int64(c[r * ldc + j]) - zw[j] * rs + colterm[j])


def row_sums(a: np.ndarray, lda: int, m: int, k: int) -> np.ndarray:
    """int64 sums of the first k bytes of each of the m rows of flat uint8 `a`."""
    return _row_sums(a, lda, m, k)


def finish_float(
    c: np.ndarray, ldc: int, rows: np.ndarray, zw: np.ndarray, colterm: np.ndarray,
    mult: np.ndarray, bias: np.ndarray, out: np.ndarray, r0: int, r1: int,
) -> None:  # fmt: skip
    """Rows r0..r1 of out (M, N) float32: ((A - za)(W - zw)) * mult + bias, from the raw
    product c, the A row sums `rows`, W's zero points zw (N,) in the packed codes and
    colterm = K za zw - za colsum(W) (N,), all int64."""
    _finish_float(c, ldc, rows, zw, colterm, mult, bias, out, r0, r1)


def finish_int32(
    c: np.ndarray, ldc: int, rows: np.ndarray, zw: np.ndarray, colterm: np.ndarray,
    out: np.ndarray, r0: int, r1: int,
) -> None:  # fmt: skip
    """`finish_float` without the scaling: the int32 (A - za)(W - zw)."""
    _finish_int32(c, ldc, rows, zw, colterm, out, r0, r1)


_ROUND: Final = np.float32(12582912.0)  # 1.5 * 2^23: (v + it) - it rounds half to even


@nb.njit(cache=True, nogil=True)
def _finish_requant(c, ldc, rows, zw, colterm, bias, mult, yz, out, r0, r1):  # pragma: no cover
    """out[r // P, j, r % P] = saturate(rint(float32(int32 result + bias[j]) * mult[j]) + yz)
    for rows r0..r1; out (N, M, P) 8-bit (a conv's NC(HW) output from its NHW x C rows).

    Blocks of 64 rows: first along each row (contiguous in c, vectorizes) into a small
    block buffer, then that block transposed into out. The product is clamped to
    [lo - yz - 1, hi - yz + 1] before rounding, which leaves the saturated result
    unchanged and keeps |v| < 2^22, where adding and subtracting 1.5 * 2^23 in
    float32 is round-half-to-even (QuantizeLinear's rounding)."""
    n = out.shape[1]
    per = out.shape[2]
    lo = np.float32(np.iinfo(out.dtype).min)
    hi = np.float32(np.iinfo(out.dtype).max)
    fz = np.float32(yz)
    vlo, vhi = lo - fz - np.float32(1.0), hi - fz + np.float32(1.0)
    of = out.reshape(-1)
    blk = np.empty((64, n), out.dtype)
    add = colterm + bias
    for b0 in range(r0, r1, 64):
        b1 = min(b0 + 64, r1)
        for r in range(b0, b1):
            rs = rows[r]
            base = r * ldc
            for j in range(n):
                v = np.float32(np.int64(c[base + j]) - zw[j] * rs + add[j]) * mult[j]
                v = min(max(v, vlo), vhi)
                q = (v + _ROUND) - _ROUND + fz
                blk[r - b0, j] = min(max(q, lo), hi)
        for r in range(b0, b1):
            at = (r // per) * n * per + r % per
            for j in range(n):
                of[at + j * per] = blk[r - b0, j]


def finish_requant(
    c: np.ndarray, ldc: int, rows: np.ndarray, zw: np.ndarray, colterm: np.ndarray,
    bias: np.ndarray, mult: np.ndarray, yz: int, out: np.ndarray, r0: int, r1: int,
) -> None:  # fmt: skip
    """`finish_int32` plus the int32 bias (N,), then QuantizeLinear's rounding with the
    float32 multiplier (N,) and zero point yz, saturated to out's 8-bit type; row r goes
    to out[r // P, :, r % P] of out (B, N, P)."""
    _finish_requant(c, ldc, rows, zw, colterm, bias, mult, yz, out, r0, r1)
