"""float32 GEMM against a weight packed once, for the short products of transformer
layers (64..200 rows): AVX-512 or AVX2 / FMA micro-kernels emitted as LLVM IR.

OpenBLAS's sgemm repacks both operands on every call; with 64 rows the weight's
repacking costs about as much as a quarter of the multiply-adds it feeds (each
packed weight value is used only M times). onnxruntime's MLAS packs constant
weights once, at session creation; so does this module:

    packed (P, K, NR) float32, P = ceil(N / NR): packed[p, k, j] = W[k, NR p + j]

(zero past column N; the array starts on a 64-byte boundary, so every vector load
of a panel row is cache-line aligned). The panel width NR is two vector registers:
32 columns with AVX-512 (<16 x float>, zmm), 16 with AVX2 (<8 x float>, ymm). A
micro-kernel computes a tile of up to MR rows x NR columns, C[i0:i0+R, NR p:NR p+NR]
= A[i0:i0+R, :] @ packed[p], with 2 R accumulator registers: per k, two weight
loads, R broadcasts of A[i, k] and 2 R fused multiply-adds. MR = 12 with AVX-512
(24 of the 32 zmm registers accumulate), 6 with AVX2 (12 of 16 ymm), the layout of
MLAS's SgemmKernelAvx512F / SgemmKernelFma3 (onnxruntime/core/mlas/lib/x86_64).
A is read in place (row-major, any row stride). The span kernel blocks KC deep so
that a panel block (KC x NR) stays in L1 while every row tile of a block of MC rows
reads it, and the (MC, KC) block of A stays in L2.

The kernel set follows the packed width, so either path runs on an AVX-512 machine
(tests pack with nr=16 to exercise the AVX2 kernels); `NR` is the host's choice.

Each output element is one dot product summed in k order with fused multiply-adds
(BLAS kernels also use FMA, in blocks of k): results match np.matmul to float32
rounding, not bit for bit. AVAILABLE is False without AVX2 / FMA (or with numba's
JIT disabled); callers then use BLAS.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any, Final

import numpy as np
from llvmlite import ir  # IR builders only (pure Python): LLVM itself is not loaded

from onnxexec.kernels import objload as nb
from onnxexec.kernels import when_imported
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.isa import has
from onnxexec.kernels.linalg import blas
from onnxexec.kernels.objload import intrinsic, jit_disabled, lazy_module

# used inside intrinsic definitions, which run only while numba compiles a kernel
types = lazy_module("numba.core.types")
cgutils = lazy_module("numba.core.cgutils")


def _asm_parser(_numba: Any) -> None:
    """LLVM must be able to assemble the AVX-512 tiles' inline asm whenever numba
    compiles code that holds them: their own compile, or a caller's that links them
    in from numba's cache."""
    import llvmlite.binding as llb

    llb.initialize_native_asmparser()


when_imported("numba", _asm_parser)
AVAILABLE: Final = not jit_disabled() and has("avx2", "fma")
AVX512: Final = AVAILABLE and has("avx512f")
NR: Final = 32 if AVX512 else 16  # columns per panel on this host
WIDTHS: Final = (16, 32) if AVX512 else (16,)  # panel widths this host runs
MR16: Final = 6  # rows per AVX2 micro-kernel (12 accumulators + 2 weight registers)
MR32: Final = 12  # rows per AVX-512 micro-kernel (24 accumulators + 2 weight registers)
MC: Final = 144  # rows per block: its (MC, KC) slice of A stays in L2
KC: Final = 256  # depth per block: a (KC, 32) panel block (32 KB) stays in L1

_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_ALIGN = 64  # bytes: a cache line, the alignment of a zmm load that never splits


def pack(w: np.ndarray, nr: int = NR) -> np.ndarray:
    """W (K, N) -> (ceil(N/nr), K, nr) float32, zero-padded columns, C-contiguous and
    64-byte aligned (a view into a slightly larger buffer).

    numpy, not numba: it runs at session creation, before any kernel has been
    dispatched (numba's first dispatch in a process costs over a second)."""
    if nr not in (16, 32):
        raise ValueError(f"pack: panel width {nr} (16 or 32)")
    k, n = w.shape
    p = -(-n // nr)
    full = n // nr
    out = empty_aligned((p, k, nr))
    if full:
        out[:full] = w[:, : full * nr].reshape(k, full, nr).transpose(1, 0, 2)
    if n % nr:
        out[full] = 0.0
        out[full, :, : n % nr] = w[:, full * nr :]
    return out


def pack_in_place(
    dst: np.ndarray,
    src: np.ndarray,
    transposed: bool,
    scratch: np.ndarray,
    nr: int = NR,
    pool: Executor | None = None,
) -> np.ndarray:
    """pack(src.T if transposed else src) written over src's own memory: `dst` is a
    writable flat float32 view of exactly src's bytes, src C-contiguous 2-D with its
    panel count exact (N a multiple of nr). Returns dst as the (N/nr, K, nr) panels.

    The packed weight is a permutation of the original's floats, so it fits the same
    bytes; with the original copied to `scratch` (at least src.size floats, reused
    across weights) the model never holds two copies of a weight (the copy pack()
    makes doubles the resident weights until the originals die with the loaded
    graph: Llama's peak RSS 1.05 -> 1.52 GB). With `pool`, two of its threads write
    half of the panels each (numpy's copies release the GIL)."""
    if nr not in (16, 32) or src.ndim != 2 or not src.flags.c_contiguous:
        raise ValueError("pack_in_place: a C-contiguous 2-D weight, panels 16 or 32 wide")
    rows, cols = src.shape
    n, k = (rows, cols) if transposed else (cols, rows)
    if n % nr or dst.size != src.size or scratch.size < src.size:
        raise ValueError(f"pack_in_place: N = {n} is not a multiple of {nr}")
    p = n // nr
    tmp = scratch[: src.size]
    tmp[:] = src.reshape(-1)
    # transposed: src is W^T (N, K), panel q is rows q*nr.. of it, transposed;
    # else src is W (K, N), panel q is its columns q*nr.. (see pack())
    view = (
        tmp.reshape(p, nr, k).transpose(0, 2, 1)
        if transposed
        else (tmp.reshape(k, p, nr).transpose(1, 0, 2))
    )
    out = dst.reshape(p, k, nr)

    def part(lo_hi: tuple[int, int]) -> None:
        out[lo_hi[0] : lo_hi[1]] = view[lo_hi[0] : lo_hi[1]]

    half = p // 2
    if pool is not None and half and src.size >= 1 << 18:
        list(pool.map(part, [(0, half), (half, p)]))
    else:
        part((0, p))
    return out


def empty_aligned(shape: tuple[int, ...]) -> np.ndarray:
    """np.empty(shape, float32) starting on a 64-byte boundary (numpy's large
    allocations start 16 bytes past a page)."""
    size = int(np.prod(shape))
    buf = np.empty(size + _ALIGN // 4, dtype=np.float32)
    skip = (-buf.ctypes.data % _ALIGN) // 4
    return buf[skip : skip + size].reshape(shape)


def unpack(wp: np.ndarray, n: int) -> np.ndarray:
    """The (K, n) weight a packed (P, K, nr) array holds (a copy)."""
    p, k, nr = wp.shape
    return np.ascontiguousarray(wp.transpose(1, 0, 2).reshape(k, p * nr)[:, :n])


def _emit_tile(builder, fma, vec, rows, accumulate, ap, lda, bp, k, cp, ldc) -> None:
    """One micro-kernel body (falls through at its end): C[r, 0:2L] (+)= sum_k A[r, k] *
    B[k, 0:2L] for r < rows, L = the vector's lanes (B rows 2L floats apart)."""
    lanes = vec.count
    zero = ir.Constant(vec, [0.0] * lanes)
    crows = [builder.gep(cp, [builder.mul(ldc, _I64(r))]) for r in range(rows)]

    def slot(row_ptr, j):
        return builder.bitcast(builder.gep(row_ptr, [_I64(lanes * j)]), vec.as_pointer())

    init = [
        [builder.load(slot(crows[r], j), align=4) if accumulate else zero for j in range(2)]
        for r in range(rows)
    ]
    undef = ir.Constant(vec, ir.Undefined)
    splat_mask = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    rows_a = [builder.gep(ap, [builder.mul(lda, _I64(r))]) for r in range(rows)]
    pre = builder.block
    loop = builder.append_basic_block("pk_loop")
    done = builder.append_basic_block("pk_done")
    builder.cbranch(builder.icmp_signed(">", k, _I64(0)), loop, done)

    builder.position_at_end(loop)
    kk = builder.phi(_I64)
    acc = [[builder.phi(vec) for _ in range(2)] for _ in range(rows)]
    brow = builder.gep(bp, [builder.mul(kk, _I64(2 * lanes))])
    bv = [builder.load(slot(brow, j), align=4) for j in range(2)]
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
    builder.cbranch(builder.icmp_signed("<", kn, k), loop, done)

    builder.position_at_end(done)
    res = [[builder.phi(vec) for _ in range(2)] for _ in range(rows)]  # phis lead a block
    for r in range(rows):
        for j in range(2):
            res[r][j].add_incoming(init[r][j], pre)
            res[r][j].add_incoming(new[r][j], end)
            builder.store(res[r][j], slot(crows[r], j), align=4)


def _make_kernel(lanes: int, mr: int) -> Any:
    """kern(rows, acc, a, lda, b, k, c, ldc): C[r, 0:2 lanes] (+)= sum_k A[r, k] *
    B[k, 0:2 lanes] for r < rows <= mr (+= when acc != 0), addresses as int64 (A rows
    lda floats apart, B a packed panel block of k rows, C rows ldc apart). One switch
    over (rows, acc) picks among the 2 mr unrolled bodies."""
    vec = ir.VectorType(_F32, lanes)

    @intrinsic
    def kern(typingctx, rows, acc, a, lda, b, k, c, ldc):
        sig = types.void(*([types.int64] * 8))

        def codegen(context, builder, signature, args):
            rows_, acc_, a_, lda_, b_, k_, c_, ldc_ = args
            fptr = _F32.as_pointer()
            ap, bp, cp = (builder.inttoptr(v, fptr) for v in (a_, b_, c_))
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{lanes}f32"
            )
            exit_ = builder.append_basic_block("pk_exit")
            case = builder.add(
                builder.mul(rows_, _I64(2)),
                builder.zext(builder.icmp_signed("!=", acc_, _I64(0)), _I64),
            )
            switch = builder.switch(case, exit_)
            for r in range(1, mr + 1):
                for accumulate in (False, True):
                    body = builder.append_basic_block(f"pk_{r}_{int(accumulate)}")
                    switch.add_case(_I64(2 * r + accumulate), body)
                    builder.position_at_end(body)
                    _emit_tile(builder, fma, vec, r, accumulate, ap, lda_, bp, k_, cp, ldc_)
                    builder.branch(exit_)
            builder.position_at_end(exit_)
            return context.get_dummy_value()

        return sig, codegen

    return kern


def _asm_tile(rows: int, accumulate: bool) -> str:
    """AT&T text of one AVX-512 tile (operands $0 a, $1 lda, $2 b, $3 k, $4 c, $5 ldc,
    strides in bytes): rows x 32 accumulators in zmm0..zmm23 (row r: 2r, 2r+1), the
    panel row in zmm24 / zmm25, the broadcast A[r, k] in zmm26 / zmm27.

    Written out rather than left to LLVM, which hoists all twelve broadcasts and runs
    out of registers (zmm spills and twelve row pointers in sixteen GPRs measured
    ~160 GFLOP/s, this loop ~190). Rows are addressed as MLAS's SgemmKernelAvx512F
    does: four base pointers three rows apart, plus lda scaled by 1 or 2."""
    base = ["%rax", "%r8", "%r9", "%r10"]
    out: list[str] = []

    def bases(ptr: str, ld: str) -> None:  # rax, r8, r9, r10 = rows 0, 3, 6, 9 of ptr
        out.append(f"mov {ptr}, %rax")
        if rows > 3:
            out.append(f"lea ({ld},{ld},2), %r11")
            out.extend(f"lea ({base[i - 1]},%r11), {base[i]}" for i in range(1, (rows + 2) // 3))

    def row(r: int, ld: str, disp: int = 0) -> str:
        b = base[r // 3]
        return f"{disp}({b})" if r % 3 == 0 else f"{disp}({b},{ld},{r % 3})"

    bases("$4", "$5")
    for r in range(rows):
        for j in range(2):
            if accumulate:
                out.append(f"vmovups {row(r, '$5', 64 * j)}, %zmm{2 * r + j}")
            else:
                out.append(f"vpxord %zmm{2 * r + j}, %zmm{2 * r + j}, %zmm{2 * r + j}")
    bases("$0", "$1")
    out += ["mov $2, %rdx", "mov $3, %r11", "test %r11, %r11", "jle 2f", "1:"]
    out += ["vmovups (%rdx), %zmm24", "vmovups 64(%rdx), %zmm25"]
    for r in range(rows):
        t = 26 + r % 2
        out.append(f"vbroadcastss {row(r, '$1')}, %zmm{t}")
        out.append(f"vfmadd231ps %zmm24, %zmm{t}, %zmm{2 * r}")
        out.append(f"vfmadd231ps %zmm25, %zmm{t}, %zmm{2 * r + 1}")
    out += [f"add $$4, {b}" for b in base[: (rows + 2) // 3]]
    out += ["add $$128, %rdx", "dec %r11", "jnz 1b", "2:"]
    bases("$4", "$5")
    for r in range(rows):
        for j in range(2):
            out.append(f"vmovups %zmm{2 * r + j}, {row(r, '$5', 64 * j)}")
    out.append("vzeroupper")  # no SSE transition penalty in the caller's code
    return "\n\t".join(out)


_CLOBBERS = ",".join(
    [f"~{{{r}}}" for r in ("rax", "rdx", "r8", "r9", "r10", "r11")]
    + [f"~{{zmm{i}}}" for i in range(28)]
    + ["~{memory}", "~{dirflag}", "~{fpsr}", "~{flags}"]
)


@intrinsic
def _tile_avx512(typingctx, rows, acc, a, lda, b, k, c, ldc):
    """C[r, 0:32] (+)= sum_k A[r, k] * B[k, 0:32] for r < rows <= MR32 (+= when acc),
    as _make_kernel's kernels, through one of the 2 MR32 inline-assembly tiles."""
    sig = types.void(*([types.int64] * 8))

    def codegen(context, builder, signature, args):
        rows_, acc_, a_, lda_, b_, k_, c_, ldc_ = args
        four = _I64(4)
        ops = [a_, builder.mul(lda_, four), b_, k_, c_, builder.mul(ldc_, four)]
        fty = ir.FunctionType(ir.VoidType(), [_I64] * 6)
        exit_ = builder.append_basic_block("pk_exit")
        flag = builder.zext(builder.icmp_signed("!=", acc_, _I64(0)), _I64)
        switch = builder.switch(builder.add(builder.mul(rows_, _I64(2)), flag), exit_)
        for r in range(1, MR32 + 1):
            for accumulate in (False, True):
                body = builder.append_basic_block(f"pk_{r}_{int(accumulate)}")
                switch.add_case(_I64(2 * r + accumulate), body)
                builder.position_at_end(body)
                text = _asm_tile(r, accumulate)
                builder.asm(fty, text, "r,r,r,r,r,r," + _CLOBBERS, ops, side_effect=True)
                builder.branch(exit_)
        builder.position_at_end(exit_)
        return context.get_dummy_value()

    return sig, codegen


_TILE16 = _make_kernel(8, MR16)
_TILE32 = _tile_avx512 if AVX512 else _make_kernel(16, MR32)


@nb.njit(nogil=True, cache=True, inline="always")
def _tile(nr, r, acc, a, lda, b, k, c, ldc):
    if nr == 32:
        _TILE32(r, acc, a, lda, b, k, c, ldc)
    else:
        _TILE16(r, acc, a, lda, b, k, c, ldc)


@nb.njit(nogil=True, cache=True)
def packed_span(a, lda, m, k, b, n, c, ldc, p0, p1, nr):
    """C[:, nr p0 : min(nr p1, n)] = A (m, k) @ W for panels [p0, p1) of the W packed
    nr wide at address b; a / c addresses of row-major float32 matrices (lda / ldc
    floats). Blocked MC rows x KC depth, each row block cut into tiles of equal height
    (64 rows: 6 tiles of 10-11, not 5 of 12 and one of 4); a partial last panel goes
    through a scratch tile."""
    mr = MR32 if nr == 32 else MR16
    q1 = min(p1, n // nr)  # full panels end here
    for i_c in range(0, m, MC):
        i_e = min(i_c + MC, m)
        tiles = -(-(i_e - i_c) // mr)
        base, extra = divmod(i_e - i_c, tiles)
        for k0 in range(0, k, KC):
            kc = min(KC, k - k0)
            for p in range(p0, q1):
                bp = b + 4 * (p * k + k0) * nr
                i0 = i_c
                for t in range(tiles):
                    h = base + (t < extra)
                    ap = a + 4 * (i0 * lda + k0)
                    _tile(nr, h, k0, ap, lda, bp, kc, c + 4 * (i0 * ldc + p * nr), ldc)
                    i0 += h
    if q1 < p1:
        tmp = np.empty((mr, nr), dtype=np.float32)
        cm = nb.carray(f32_ptr(c), (m, ldc))
        c0 = q1 * nr
        w = n - c0
        for i0 in range(0, m, mr):
            r = min(mr, m - i0)
            _tile(nr, r, 0, a + 4 * i0 * lda, lda, b + 4 * q1 * k * nr, k, tmp.ctypes.data, nr)
            for i in range(r):
                for j in range(w):
                    cm[i0 + i, c0 + j] = tmp[i, j]


@nb.njit(nogil=True, cache=True)
def packed_job(a, fa, p0, p1):
    """Panels [p0, p1) of a GEMM job (blas's slots; W = the packed weight's address,
    LDB its panel width), then its bias / activation epilogue on those columns."""
    m, n, k, nr = a[blas.M], a[blas.N], a[blas.K], a[blas.LDB]
    packed_span(a[blas.X], a[blas.LDA], m, k, a[blas.W], n, a[blas.OUT], a[blas.LDC], p0, p1, nr)
    blas.span_epilogue(a, fa, 0, m, p0 * nr, min(p1 * nr, n))
