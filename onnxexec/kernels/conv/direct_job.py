"""The direct convolution's micro-kernel, block kernels and native-pool job
(kernels/conv/conv_direct.py dispatches; this module imports nothing from parallel.py,
which runs `direct_job`).

KxK float32 convolution on an AVX-512 register-blocked micro-kernel that
reads both operands in place: no im2col matrix, no packed copy of either operand, and
every output written once.

The output is computed at the phase-plane width wq (conv_taps.phase_planes: the
zero-padded input split by stride phase, (S, Cg, hq, wq)); columns j >= OW of each
output row are junk, dropped by the epilogue. Output pixel q = i * wq + j of tap
(a, b) then reads plane (a*dh % sh) * sw + b*dw % sw of channel c at q + (a*dh // sh)
* wq + b*dw // sw: for a fixed tap and channel, 32 consecutive output pixels read 32
consecutive floats. So a tile of R output channels x 32 output pixels is

    C[r, 0:32] = sum over taps t, channels c of W[m0 + r, t, c] * X_t[c, q0 : q0 + 32]

with the weight stored OHWI ((M, KH*KW*Cg) rows, passes/conv_layout.py), whose
k = (t, c) order the kernel walks straight through, and X_t[c] one plane row, Cg
channel planes apart (a fixed stride) at an offset per tap. The micro-kernel holds the
R x 32 accumulators in 2 R zmm registers across all taps and channels (R <= 12, the
register layout of MLAS's SgemmKernelAvx512F, sgemm_packed._asm_tile): per k two
unaligned loads of the input row, R broadcasts of weights and 2 R fused multiply-adds.
Against conv_taps (one BLAS sgemm per tap, each repacking both operands and adding
into the output tile) this moves no data but the accumulators' one store.

Spans (native/parallel.py KIND_DIRECT) are ranges of column blocks (output rows)
or, when there are few of those, of channel tiles. A column block holds whole output
rows, sized so its input window and its ext (M x cols) block stay in L2. The tiles
add the bias and apply Relu / Clip before their store (when no residual comes first);
the block epilogue adds the residual, runs any other activation and drops the junk
columns while the block is hot. Results: each output is one sum in k order with
fused multiply-adds, as BLAS's within a block of k; tests/unit/kernels/
test_conv_direct.py compares with a float64 numpy convolution.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

import numpy as np
from llvmlite import ir  # IR builders only (pure Python): LLVM itself is not loaded

from onnxexec.kernels import objload as nb
from onnxexec.kernels import tuning, when_imported
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.intrinsics import f32_ptr, i64_ptr
from onnxexec.kernels.isa import has
from onnxexec.kernels.math.activations import act_row
from onnxexec.kernels.objload import intrinsic, jit_disabled, lazy_module

types = lazy_module("numba.core.types")


def _asm_parser(_numba: Any) -> None:
    import llvmlite.binding as llb

    llb.initialize_native_asmparser()


when_imported("numba", _asm_parser)

AVAILABLE: Final = not jit_disabled() and has("avx512f")
MR: Final = 12  # output channels per tile (24 zmm accumulators)
NR: Final = 32  # output pixels per tile (two zmm)
_I64 = ir.IntType(64)
U = np.uint64
_L2_FLOATS: Final = tuning.DIRECT_L2_FLOATS  # 512 KB: an input window or ext block kept in L2

# the micro-kernel's parameter block (int64): W rows, their stride (bytes), X base,
# its channel stride (bytes), C, its row stride (bytes), the segment table, its
# length, then the store's epilogue: bias (one float per row) or 0, a residual laid
# out as C or 0, a (low, high) float32 clamp or 0
_PA, _PLDA, _PB, _PLDB, _PC, _PLDC, _PSEG, _PNSEG, _PBIAS, _PZ, _PCLAMP = range(11)
_NPARAMS: Final = 11


def _asm_tile(rows: int) -> str:
    """AT&T text of one tile: rows x 32 accumulators in zmm0..zmm23 (row r: 2r, 2r+1),
    the input row in zmm24 / zmm25, weight broadcasts in zmm26 / zmm27. $0 points at
    the parameter block; the segment table holds (byte offset into X, channel count)
    pairs, one per tap. Weight rows are addressed as in sgemm_packed._asm_tile: four
    bases three rows apart plus lda scaled by 1 or 2. Before the store: + bias[r],
    + the residual, then max(low, .) and min(high, .) with the accumulator as the
    second source, so a NaN stays NaN (as numpy's maximum / minimum)."""
    base = ["%rax", "%r8", "%r9", "%r10"]
    zbase = ["%rsi", "%rdi", "%rcx", "%r13"]
    nb_ = (rows + 2) // 3
    out: list[str] = []
    acc = [f"%zmm{i}" for i in range(2 * rows)]

    def bases(regs: list[str], ld: str) -> None:
        if rows > 3:
            out.append(f"lea ({ld},{ld},2), %r11")
            out.extend(f"lea ({regs[i - 1]},%r11), {regs[i]}" for i in range(1, nb_))

    def row(r: int, ld: str, disp: int = 0, regs: list[str] = base) -> str:
        b = regs[r // 3]
        return f"{disp}({b})" if r % 3 == 0 else f"{disp}({b},{ld},{r % 3})"

    out += [f"vpxord {a}, {a}, {a}" for a in acc]
    out += [
        f"mov {8 * _PA}($0), %rax",
        f"mov {8 * _PLDA}($0), %r12",
        f"mov {8 * _PB}($0), %r14",
        f"mov {8 * _PLDB}($0), %r13",
        f"mov {8 * _PSEG}($0), %rsi",
        f"mov {8 * _PNSEG}($0), %rcx",
    ]
    bases(base, "%r12")
    out += ["test %rcx, %rcx", "jle 3f", "0:"]
    out += ["mov (%rsi), %rdx", "add %r14, %rdx", "mov 8(%rsi), %rdi"]
    out += ["test %rdi, %rdi", "jle 2f", "1:"]
    # the next tile along the row (32 columns on) reads the 128 bytes after these:
    # fetch them now, as each k's row is a stride away from the last (its own page
    # for a 1x1 conv's input), which the hardware prefetchers don't follow
    out += ["vmovups (%rdx), %zmm24", "vmovups 64(%rdx), %zmm25"]
    out += ["prefetcht0 128(%rdx)", "prefetcht0 192(%rdx)", "add %r13, %rdx"]
    for r in range(rows):
        t = 26 + r % 2
        out.append(f"vbroadcastss {row(r, '%r12')}, %zmm{t}")
        out.append(f"vfmadd231ps %zmm24, %zmm{t}, %zmm{2 * r}")
        out.append(f"vfmadd231ps %zmm25, %zmm{t}, %zmm{2 * r + 1}")
    out += [f"add $$4, {b}" for b in base[:nb_]]
    out += ["dec %rdi", "jnz 1b", "2:", "add $$16, %rsi", "dec %rcx", "jnz 0b", "3:"]
    out += [f"mov {8 * _PLDC}($0), %r12"]
    out += [f"mov {8 * _PBIAS}($0), %rdx", "test %rdx, %rdx", "jz 4f"]
    for r in range(rows):
        out.append(f"vbroadcastss {4 * r}(%rdx), %zmm26")
        out += [f"vaddps %zmm26, {a}, {a}" for a in acc[2 * r : 2 * r + 2]]
    out += ["4:", f"mov {8 * _PZ}($0), %rsi", "test %rsi, %rsi", "jz 5f"]
    bases(zbase, "%r12")
    for r in range(rows):
        for j in range(2):
            a = acc[2 * r + j]
            out.append(f"vaddps {row(r, '%r12', 64 * j, zbase)}, {a}, {a}")
    out += ["5:", f"mov {8 * _PCLAMP}($0), %rdx", "test %rdx, %rdx", "jz 6f"]
    out += ["vbroadcastss (%rdx), %zmm26", "vbroadcastss 4(%rdx), %zmm27"]
    for a in acc:
        out += [f"vmaxps {a}, %zmm26, {a}", f"vminps {a}, %zmm27, {a}"]
    out += ["6:", f"mov {8 * _PC}($0), %rax"]
    bases(base, "%r12")
    for r in range(rows):
        for j in range(2):
            out.append(f"vmovups {acc[2 * r + j]}, {row(r, '%r12', 64 * j)}")
    out.append("vzeroupper")
    return "\n\t".join(out)


_CLOBBERS = ",".join(
    [f"~{{{r}}}" for r in ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")]
    + [f"~{{r{i}}}" for i in (12, 13, 14)]
    + [f"~{{zmm{i}}}" for i in range(28)]
    + ["~{memory}", "~{dirflag}", "~{fpsr}", "~{flags}"]
)


def rows_asm(text_of: Callable[[int], str], clobbers: str, label: str) -> tuple[Any, Any]:
    """(signature, codegen) of an intrinsic (rows, params) running text_of(rows), for
    rows in 1..MR, on the parameter block at address `params` ($0): one inline-assembly
    body per row count behind a switch. Nothing on hosts without AVX-512."""
    sig = types.void(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        if not AVAILABLE:
            return context.get_dummy_value()
        rows_, params_ = args
        fty = ir.FunctionType(ir.VoidType(), [_I64])
        exit_ = builder.append_basic_block(f"{label}_exit")
        switch = builder.switch(rows_, exit_)
        for r in range(1, MR + 1):
            body = builder.append_basic_block(f"{label}_{r}")
            switch.add_case(_I64(r), body)
            builder.position_at_end(body)
            builder.asm(fty, text_of(r), "r," + clobbers, [params_], side_effect=True)
            builder.branch(exit_)
        builder.position_at_end(exit_)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _tile(typingctx, rows, params):
    """The rows x 32 tile described by the parameter block at address `params`, rows
    in 1..MR (one of MR inline-assembly bodies)."""
    return rows_asm(_asm_tile, _CLOBBERS, "dt")


def segments(
    kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, cg: int, hq: int, wq: int
) -> np.ndarray:
    """The (byte offset into the phase planes, channel count) pair of each tap, in the
    weight's (a, b) order: tap (a, b) reads plane (a*dh % sh) * sw + b*dw % sw at pixel
    offset (a*dh // sh) * wq + b*dw // sw."""
    seg = np.empty((kh * kw, 2), dtype=np.int64)
    for a in range(kh):
        for b in range(kw):
            ra, cb = a * dh, b * dw
            plane = (ra % sh) * sw + cb % sw
            seg[a * kw + b] = (4 * (plane * cg * hq * wq + (ra // sh) * wq + cb // sw), cg)
    return seg


@nb.njit(nogil=True, cache=True, error_model="numpy")
def direct_block(x, ldb, w, segs, m0, m1, q0, ncols, c, ldc, bias, z, clamp):
    """The tiles of channels [m0, m1) and columns [q0, q0 + ncols) (ncols a multiple of
    NR): C[m - m0, j - q0] at address c (rows ldc floats apart) = the sum, + bias[m]
    (bias an address or 0), + the residual at address z (laid out as C, or 0), clamped
    to the float32 pair at address clamp (or 0). x is the input's address (segs' byte
    offsets are from it), ldb its channel stride in floats, w (M, K) the weight rows."""
    k = w.shape[1]
    params = np.zeros(_NPARAMS, dtype=np.int64)
    params[_PLDA] = 4 * k
    params[_PLDB] = 4 * ldb
    params[_PLDC] = 4 * ldc
    params[_PSEG] = segs.ctypes.data
    params[_PNSEG] = segs.shape[0]
    params[_PCLAMP] = clamp
    mm = m1 - m0
    tiles = -(-mm // MR)
    base, extra = divmod(mm, tiles)
    # addresses taken once: each .ctypes in numba holds a reference to its array (an
    # atomic increment and decrement per use, which per tile cost ~18% of a call)
    w_at, p_at = w.ctypes.data, params.ctypes.data
    i0 = 0
    for t in range(tiles):
        h = base + (t < extra)
        params[_PA] = w_at + 4 * (m0 + i0) * k
        params[_PBIAS] = bias + 4 * (m0 + i0) if bias else 0
        for p in range(0, ncols, NR):
            params[_PB] = x + 4 * (q0 + p)
            params[_PC] = c + 4 * (i0 * ldc + p)
            params[_PZ] = z + 4 * (i0 * ldc + p) if z else 0
            _tile(h, p_at)
        i0 += h


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _finish(ext, m0, m1, wq, ow, i0, i1, y, bias, has_b, z, has_z, code, al, be):
    """y[m, i * OW + j] = act(ext[m - m0, (i - i0) * wq + j] + bias[m] + z[m, same]);
    has_b / code 0 when the tiles applied them already. uint64 indices (U): with
    signed ones numba tests each for negative wrap-around and LLVM leaves the short
    rows (7-112 floats) unvectorized, 2x slower on 56-wide rows."""
    tmp = np.empty(ow, dtype=np.float32)
    scratch = np.empty(ow, dtype=np.int32)
    a32, b32 = np.float32(al), np.float32(be)
    for m in range(m0, m1):
        b0 = bias[m] if has_b else np.float32(0.0)
        src = ext[m - m0]
        dst = y[m]
        zr = z[m] if has_z else z[0]
        for i in range(i0, i1):
            so = U((i - i0) * wq)
            do = U(i * ow)
            if has_z:
                for j in range(ow):
                    dst[do + U(j)] = src[so + U(j)] + b0 + zr[do + U(j)]
            elif has_b:
                for j in range(ow):
                    dst[do + U(j)] = src[so + U(j)] + b0
            else:
                for j in range(ow):
                    dst[do + U(j)] = src[so + U(j)]
            if code:
                act_row(dst[i * ow : (i + 1) * ow], code, a32, b32, tmp, scratch)


@lru_cache(maxsize=64)
def clamp_of(code: int, alpha: float, beta: float) -> np.ndarray | None:
    """The (low, high) clamp the tiles apply for activation `code` (RELU, or CLIP with
    min alpha, max beta), or None when the epilogue must run the activation; made
    once per (code, alpha, beta), not per call."""
    if code not in (Activation.RELU, Activation.CLIP):
        return None
    relu = code == Activation.RELU
    pair = np.array([0.0, np.inf] if relu else [alpha, beta], dtype=np.float32)
    pair.flags.writeable = False
    return pair


@nb.njit(nogil=True, cache=True, error_model="numpy")
def direct_span(x, ldb, w, segs, wq, oh, ow, rpb, chans, s0, s1, y, bias, has_b, z, has_z,
                code, al, be, clamp):  # fmt: skip
    """Span [s0, s1) of a KxK conv: blocks of rpb output rows over all channels
    (chans 0), or channel tiles [s0, s1) (in units of MR) over all blocks (chans 1).
    clamp: the address of code's (low, high) pair (clamp_of) or 0."""
    m = y.shape[0]
    nblocks = -(-oh // rpb)
    b0, b1, m0, m1 = s0, s1, 0, m
    if chans:
        b0, b1, m0, m1 = 0, nblocks, s0 * MR, min(m, s1 * MR)
    cols = -(-(rpb * wq) // NR) * NR
    ext = np.empty((m1 - m0, cols), dtype=np.float32)
    # the tiles add the bias and clamp unless a residual comes between (act(. + z))
    tb = bias.ctypes.data if has_b else 0
    tc = clamp if not has_z else 0
    fcode = 0 if tc else code
    ext_at = ext.ctypes.data
    for blk in range(b0, b1):
        i0 = blk * rpb
        i1 = min(oh, i0 + rpb)
        n = -(-((i1 - i0) * wq) // NR) * NR
        direct_block(x, ldb, w, segs, m0, m1, i0 * wq, n, ext_at, cols, tb, 0, tc)
        _finish(ext, m0, m1, wq, ow, i0, i1, y, bias, False, z, has_z, fcode, al, be)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def pointwise_span(x, w, cpb, chans, s0, s1, y, bias, has_b, z, has_z, code, al, be, clamp):
    """Span [s0, s1) of a 1x1 conv y (M, P) = act(w (M, C) @ x (C, P) + bias + z), x at
    address `x`: blocks of cpb columns (a multiple of NR) over all channels (chans 0)
    or channel tiles [s0, s1) over all columns (chans 1). Full panels are stored into
    y by the tiles, epilogue included; a last partial panel reads a zero-padded copy of
    its columns and stores through a scratch."""
    m, p = y.shape
    c = w.shape[1]
    segs = np.empty((1, 2), dtype=np.int64)
    segs[0, 0] = 0
    segs[0, 1] = c
    nblocks = -(-p // cpb)
    b0, b1, m0, m1 = s0, s1, 0, m
    if chans:
        b0, b1, m0, m1 = 0, nblocks, s0 * MR, min(m, s1 * MR)
    tb = bias.ctypes.data if has_b else 0
    tz = z.ctypes.data if has_z else 0
    y_at = y.ctypes.data
    tmp = np.empty(cpb, dtype=np.float32)  # act_row's scratch for a block's row
    scratch = np.empty(cpb, dtype=np.int32)
    a32, b32 = np.float32(al), np.float32(be)
    for blk in range(b0, b1):
        j0 = blk * cpb
        j1 = min(p, j0 + cpb)
        full = (j1 - j0) // NR * NR
        if full:
            at = 4 * (m0 * p + j0)  # tile rows count from m0
            direct_block(x, p, w, segs, m0, m1, j0, full, y_at + at, p, tb,
                         tz + at if has_z else 0, clamp)  # fmt: skip
            if code and not clamp:
                for mi in range(m0, m1):
                    act_row(y[mi, j0 : j0 + full], code, a32, b32, tmp, scratch)
        if j1 - j0 > full:
            q = j0 + full
            r = j1 - q
            # the tile loads NR columns of every channel: read in place, the last
            # channel's would run NR - r floats past the input's end (a fault when a
            # page ends there), so the r columns go into a zero-padded panel first
            xin = nb.carray(f32_ptr(x), (c, p))
            panel = np.zeros((c, NR), dtype=np.float32)
            for ci in range(c):
                for j in range(r):
                    panel[ci, j] = xin[ci, q + j]
            ext = np.empty((m1 - m0, NR), dtype=np.float32)
            direct_block(
                panel.ctypes.data, NR, w, segs, m0, m1, 0, NR, ext.ctypes.data, NR, tb, 0, 0
            )
            for mi in range(m0, m1):
                dst = y[mi, q:j1]
                for j in range(r):
                    dst[j] = ext[mi - m0, j] + (z[mi, q + j] if has_z else np.float32(0.0))
                if code:
                    act_row(dst, code, a32, b32, tmp, scratch)


# ----- the span a pool thread runs ---------------------------------------------------
# Job arguments (slots of the pool's int64 array; alpha / beta in its float64 array):
# the input's address and channel stride (floats; 1x1: its column count), the weight
# rows (M, K), the segment table and its length (KxK), the geometry (1x1: OH = 1,
# OW = P), rows (1x1: columns) per block, the split (0: spans are ranges of blocks,
# 1: of channel tiles), y (M, OH * OW), bias (M,) or 0, the residual z (M, OH * OW)
# or 0, the activation code, the clamp pair's address or 0, and 1 for a 1x1 job.
(
    DX, DLDB, DW, DM, DK, DSEG, DNSEG, DWQ, DOH, DOW, DRPB, DCHANS, DY, DBIAS, DZ, DACT,
    DCLAMP, DPOINT,
) = range(18)  # fmt: skip
DIRECT_ARGS: Final = 18
_NO_Z = np.zeros((1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True)
def direct_job(a, fa, s0, s1):
    """Span [s0, s1) of the direct-conv job in slots `a` (above)."""
    m, oh, ow = a[DM], a[DOH], a[DOW]
    w = nb.carray(f32_ptr(a[DW]), (m, a[DK]))
    y = nb.carray(f32_ptr(a[DY]), (m, oh * ow))
    has_b, has_z = a[DBIAS] != 0, a[DZ] != 0
    bias = nb.carray(f32_ptr(a[DBIAS]), (m,)) if has_b else _NO_Z[0]
    z = nb.carray(f32_ptr(a[DZ]), (m, oh * ow)) if has_z else _NO_Z
    if a[DPOINT]:
        pointwise_span(
            a[DX], w, a[DRPB], a[DCHANS], s0, s1, y, bias, has_b, z, has_z, a[DACT],
            fa[0], fa[1], a[DCLAMP],
        )  # fmt: skip
        return
    segs = nb.carray(i64_ptr(a[DSEG]), (a[DNSEG], 2))
    direct_span(
        a[DX], a[DLDB], w, segs, a[DWQ], oh, ow, a[DRPB], a[DCHANS], s0, s1, y, bias,
        has_b, z, has_z, a[DACT], fa[0], fa[1], a[DCLAMP],
    )  # fmt: skip
