"""The 3x3 depthwise kernel's inner loop as one AVX-512 inline-assembly run
(kernels/conv/depthwise_planes.py calls it for each block of virtual output pixels), its
masked variant over unpadded planes, and masked row copies.

The block's nine taps read nine contiguous runs of the stride-phase planes, so 16
outputs are: bias, nine fused multiply-adds whose memory operands are the runs'
next 16 floats, a clamp (max / min with the accumulator as the second source, so a
NaN stays NaN, as numpy's maximum / minimum), and one store. The nine weights, the
bias and the clamp stay in registers for the whole run. numba's loop over the same
arithmetic takes two passes through the block with 256-bit vectors and separate
multiplies and adds (it may not contract them into FMAs); with the run, a whole
32 x 112 x 112 call went from 401 to 352 us on one thread of this AVX-512 VM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from llvmlite import ir  # IR builders only (pure Python): LLVM itself is not loaded

from onnxexec.kernels import when_imported
from onnxexec.kernels.isa import has
from onnxexec.kernels.objload import intrinsic, jit_disabled, lazy_module

types = lazy_module("numba.core.types")
AVAILABLE: Final = not jit_disabled() and has("avx512f")
LANES: Final = 16  # outputs per step; callers leave this many floats of slack
_I64 = ir.IntType(64)

# the parameter block (int64): the nine taps' source addresses at the run's first
# output, the destination, the number of 16-float steps, and the addresses of the
# nine weights, the bias (one float) and the (low, high) clamp pair
PSRC, PDST, PSTEPS, PW, PBIAS, PCLAMP = 0, 9, 10, 11, 12, 13
NPARAMS: Final = 14
_TAPS = ("%rax", "%rcx", "%rdx", "%rsi", "%rdi", "%r8", "%r9", "%r10", "%r11")


def _asm_parser(_numba: Any) -> None:
    import llvmlite.binding as llb

    llb.initialize_native_asmparser()


when_imported("numba", _asm_parser)


def _preamble() -> list[str]:
    """Both runs' set-up: the taps' source addresses, the nine weights in zmm16-24,
    the bias in zmm25, the clamp in zmm26 / zmm27, the destination and step count."""
    out = [f"mov {8 * (PSRC + t)}($0), {r}" for t, r in enumerate(_TAPS)]
    out += [f"mov {8 * PW}($0), %r12"]
    out += [f"vbroadcastss {4 * t}(%r12), %zmm{16 + t}" for t in range(9)]
    out += [f"mov {8 * PBIAS}($0), %r12", "vbroadcastss (%r12), %zmm25"]
    out += [f"mov {8 * PCLAMP}($0), %r12", "vbroadcastss (%r12), %zmm26"]
    out += ["vbroadcastss 4(%r12), %zmm27"]
    return [*out, f"mov {8 * PDST}($0), %r12", f"mov {8 * PSTEPS}($0), %r13"]


def _asm_run() -> str:
    out = _preamble()
    out += ["test %r13, %r13", "jle 2f", "1:", "vmovaps %zmm25, %zmm0"]
    out += [f"vfmadd231ps ({r}), %zmm{16 + t}, %zmm0" for t, r in enumerate(_TAPS)]
    out += ["vmaxps %zmm0, %zmm26, %zmm0", "vminps %zmm0, %zmm27, %zmm0"]
    out += ["vmovups %zmm0, (%r12)"]
    out += [f"add $$64, {r}" for r in (*_TAPS, "%r12")]
    out += ["dec %r13", "jnz 1b", "2:", "vzeroupper"]
    return "\n\t".join(out)


def clobber_list(gprs: Sequence[str], zmms: Sequence[int], masks: Sequence[int] = ()) -> str:
    """An asm body's clobber list: registers given as "%rax", zmm and k numbers."""
    return ",".join(
        [f"~{{{r.lstrip('%')}}}" for r in gprs]
        + [f"~{{zmm{i}}}" for i in zmms]
        + [f"~{{k{i}}}" for i in masks]
        + ["~{memory}", "~{dirflag}", "~{fpsr}", "~{flags}"]
    )


_CLOBBERS = clobber_list((*_TAPS, "%r12", "%r13"), (0, *range(16, 28)))


def _block_asm(text: str, clobbers: str) -> tuple[Any, Any]:
    """(signature, codegen) of an intrinsic running `text` on one int64 argument, the
    address of its parameter block ($0); on hosts without AVX-512 it emits nothing."""

    def codegen(context, builder, signature, args):
        if AVAILABLE:
            fty = ir.FunctionType(ir.VoidType(), [_I64])
            builder.asm(fty, text, "r," + clobbers, [args[0]], side_effect=True)
        return context.get_dummy_value()

    return types.void(types.int64), codegen


@intrinsic
def dw9_run(typingctx, params):
    """The run described by the parameter block at address `params` (AVX-512 hosts;
    elsewhere it compiles to nothing and callers keep their numba loop)."""
    return _block_asm(_asm_run(), _CLOBBERS)


NO_CLAMP: Final = np.array([-np.inf, np.inf], dtype=np.float32)

# dw9_masked_run's block: dw9_run's slots plus the address of its mask table, uint16
# (steps, MASKS): per 16-output step the nine taps' lane masks, then the store's
PMASK: Final = 14
NMPARAMS: Final = 15
MASKS: Final = 10


def _asm_masked_run() -> str:
    """dw9_run reading the unpadded input plane in place: a tap's lanes whose input
    pixel lies in the zero padding are masked off (merge masking keeps the sum; a
    masked-off lane of a memory operand is not read, so a tap reaching before or past
    the plane reads nothing there), and the store is masked to the plane's outputs."""
    out = [*_preamble(), f"mov {8 * PMASK}($0), %r14"]
    out += ["test %r13, %r13", "jle 2f", "1:", "vmovaps %zmm25, %zmm0"]
    for t, r in enumerate(_TAPS):
        k = 1 + t % 7
        out += [f"kmovw {2 * t}(%r14), %k{k}", f"vfmadd231ps ({r}), %zmm{16 + t}, %zmm0{{%k{k}}}"]
    out += ["vmaxps %zmm0, %zmm26, %zmm0", "vminps %zmm0, %zmm27, %zmm0"]
    out += [f"kmovw {2 * (MASKS - 1)}(%r14), %k1", "vmovups %zmm0, (%r12){%k1}"]
    out += [f"add $$64, {r}" for r in (*_TAPS, "%r12")]
    out += [f"add $${2 * MASKS}, %r14", "dec %r13", "jnz 1b", "2:", "vzeroupper"]
    return "\n\t".join(out)


_MASKED_CLOBBERS = clobber_list((*_TAPS, "%r12", "%r13", "%r14"), (0, *range(16, 28)), range(1, 8))


@intrinsic
def dw9_masked_run(typingctx, params):
    """The masked run of the block at address `params` (AVX-512 hosts; elsewhere it
    compiles to nothing: callers only take it where AVAILABLE)."""
    return _block_asm(_asm_masked_run(), _MASKED_CLOBBERS)


def tap_masks(height: int, width: int) -> np.ndarray:
    """dw9_masked_run's mask table for a 3x3, stride 1, pad 1 depthwise conv over a
    height x width plane: output p = i * width + j takes tap (a, b) where input pixel
    (i + a - 1, j + b - 1) is inside the plane; lanes past the last output take
    nothing and store nothing."""
    n = height * width
    steps = -(-n // LANES)
    p = np.arange(steps * LANES)
    i, j, live = p // width, p % width, p < n
    lanes = np.uint32(1) << np.arange(LANES, dtype=np.uint32)
    table = np.empty((steps, MASKS), dtype=np.uint16)
    for a in range(3):
        for b in range(3):
            r, c = i + a - 1, j + b - 1
            ok = live & (r >= 0) & (r < height) & (c >= 0) & (c < width)
            table[:, 3 * a + b] = (ok.reshape(steps, LANES) * lanes).sum(axis=1)
    table[:, MASKS - 1] = (live.reshape(steps, LANES) * lanes).sum(axis=1)
    return table


# rows_copy's parameter block (int64): source and destination addresses, the number of
# rows, the floats a row, and the source / destination row strides in bytes
CSRC, CDST, CROWS, CWIDTH, CSSTRIDE, CDSTRIDE = range(6)
CPARAMS: Final = 6


def _asm_rows() -> str:
    """Each row: whole 16-float vectors, then the rest under mask k1 (a masked-out lane
    is neither read nor written, so a short row never touches memory past its end)."""
    load = [f"mov {8 * CSRC}($0), %rax", f"mov {8 * CDST}($0), %rcx"]
    load += [f"mov {8 * CROWS}($0), %rdx", f"mov {8 * CWIDTH}($0), %rsi"]
    load += [f"mov {8 * CSSTRIDE}($0), %rdi", f"mov {8 * CDSTRIDE}($0), %r8"]
    mask = ["mov %rsi, %r9", "and $$15, %r9", "mov $$1, %r10", "shlx %r9, %r10, %r10"]
    mask += ["dec %r10", "kmovw %r10d, %k1", "mov %rsi, %r9", "shr $$4, %r9"]
    loop = ["test %rdx, %rdx", "jle 4f", "1:", "xor %r10, %r10", "mov %r9, %r11"]
    loop += ["test %r11, %r11", "jz 3f", "2:", "vmovups (%rax,%r10), %zmm0"]
    loop += ["vmovups %zmm0, (%rcx,%r10)", "add $$64, %r10", "dec %r11", "jnz 2b", "3:"]
    loop += ["vmovups (%rax,%r10), %zmm0{%k1}{z}", "vmovups %zmm0, (%rcx,%r10){%k1}"]
    loop += ["add %rdi, %rax", "add %r8, %rcx", "dec %rdx", "jnz 1b", "4:", "vzeroupper"]
    return "\n\t".join(load + mask + loop)


_GPRS = ("%rax", "%rcx", "%rdx", "%rsi", "%rdi", "%r8", "%r9", "%r10", "%r11")
_ROW_CLOBBERS = clobber_list(_GPRS, (0,), (1,))


@intrinsic
def rows_copy(typingctx, params):
    """Copy the rows the block at address `params` describes (AVX-512 hosts; elsewhere
    nothing, and callers keep their numba loops). A numba loop over a 7- or 14-float
    row is scalar: with these copies in and out of the phase planes a 960 x 7 x 7
    depthwise call went from 83 to 73 us on one thread (384 x 14 x 14: 76 to 57)."""
    return _block_asm(_asm_rows(), _ROW_CLOBBERS)


# dw9_s2_run's parameter block (int64): the first output row's three tap rows (input
# rows 2i - 1, 2i, 2i + 1; a row in the padding points at zeros), its destination, the
# number of output rows, 16-output steps a row, the addresses of the nine weights, the
# bias, the clamp pair, the mask table (uint16 (steps, 3)) and the permute indices
# (int32 evens 0, 2 .. 30 then odds 1, 3 .. 31), and the bytes from one output row's
# tap rows / destination to the next's
S2SRC, S2DST, S2ROWS, S2STEPS, S2W, S2BIAS, S2CLAMP, S2MASK, S2IDX = 0, 3, 4, 5, 6, 7, 8, 9, 10
S2INSTRIDE, S2OUTSTRIDE = 11, 12
NS2PARAMS: Final = 13
_S2_ROWS = ("%r8", "%r9", "%r10")
_S2_TAPS = ("%rax", "%rcx", "%rdx")


def _asm_s2_run() -> str:
    """A 3x3, stride 2, pad-begin 1 depthwise plane read in place, one output row of
    16-output steps at a time. Step s of tap row a loads input columns 32s .. 32s + 31
    (two loads, zeroing the lanes the table masks: columns past the row, which are
    padding), splits them into evens (column 2j: tap b = 1) and odds (2j + 1: b = 2)
    with vpermi2ps, and takes b = 0 (column 2j - 1) as the odds moved up one lane
    behind the previous step's last odd (valignd; zero at a row's start: the left
    padding). Zero lanes multiply the weights as the spec's zero padding does (an
    infinite weight gives NaN there too)."""
    out = [f"mov {8 * (S2SRC + a)}($0), {r}" for a, r in enumerate(_S2_ROWS)]
    out += [f"mov {8 * S2W}($0), %r12"]
    out += [f"vbroadcastss {4 * t}(%r12), %zmm{16 + t}" for t in range(9)]
    out += [f"mov {8 * S2BIAS}($0), %r12", "vbroadcastss (%r12), %zmm25"]
    out += [f"mov {8 * S2CLAMP}($0), %r12", "vbroadcastss (%r12), %zmm26"]
    out += ["vbroadcastss 4(%r12), %zmm27", f"mov {8 * S2IDX}($0), %r12"]
    out += ["vmovups (%r12), %zmm28", "vmovups 64(%r12), %zmm29"]
    out += [f"mov {8 * S2DST}($0), %r11", f"mov {8 * S2ROWS}($0), %r15"]
    out += [f"mov {8 * S2INSTRIDE}($0), %rsi", f"mov {8 * S2OUTSTRIDE}($0), %rdi"]
    out += ["test %r15, %r15", "jle 4f", "1:"]
    out += [f"mov {r}, {t}" for r, t in zip(_S2_ROWS, _S2_TAPS, strict=True)]
    out += ["mov %r11, %r12", f"mov {8 * S2STEPS}($0), %r13", f"mov {8 * S2MASK}($0), %r14"]
    out += ["vpxord %zmm1, %zmm1, %zmm1", "vpxord %zmm2, %zmm2, %zmm2"]
    out += ["vpxord %zmm3, %zmm3, %zmm3", "2:", "vmovaps %zmm25, %zmm0"]
    out += ["kmovw (%r14), %k1", "kmovw 2(%r14), %k2", "kmovw 4(%r14), %k3"]
    for a, r in enumerate(_S2_TAPS):
        prev = f"%zmm{1 + a}"
        out += [f"vmovups ({r}), %zmm4{{%k1}}{{z}}", f"vmovups 64({r}), %zmm5{{%k2}}{{z}}"]
        out += ["vmovaps %zmm28, %zmm6", "vpermi2ps %zmm5, %zmm4, %zmm6"]
        out += ["vmovaps %zmm29, %zmm7", "vpermi2ps %zmm5, %zmm4, %zmm7"]
        out += [f"valignd $$15, {prev}, %zmm7, %zmm8", f"vmovaps %zmm7, {prev}"]
        out += [f"vfmadd231ps %zmm8, %zmm{16 + 3 * a}, %zmm0"]
        out += [f"vfmadd231ps %zmm6, %zmm{17 + 3 * a}, %zmm0"]
        out += [f"vfmadd231ps %zmm7, %zmm{18 + 3 * a}, %zmm0", f"add $$128, {r}"]
    out += ["vmaxps %zmm0, %zmm26, %zmm0", "vminps %zmm0, %zmm27, %zmm0"]
    out += ["vmovups %zmm0, (%r12){%k3}", "add $$64, %r12", "add $$6, %r14"]
    out += ["dec %r13", "jnz 2b"]
    out += [f"add %rsi, {r}" for r in _S2_ROWS]
    out += ["add %rdi, %r11", "dec %r15", "jnz 1b", "4:", "vzeroupper"]
    return "\n\t".join(out)


_S2_CLOBBERS = clobber_list(
    (*_GPRS, "%r12", "%r13", "%r14", "%r15"), (*range(9), *range(16, 30)), range(1, 4)
)


@intrinsic
def dw9_s2_run(typingctx, params):
    """The stride-2 rows of the block at address `params` (AVX-512 hosts; elsewhere it
    compiles to nothing: callers only take it where AVAILABLE)."""
    return _block_asm(_asm_s2_run(), _S2_CLOBBERS)


def s2_masks(width: int, ow: int) -> np.ndarray:
    """dw9_s2_run's table for width-wide input rows and ow-wide output rows: per step s
    the lanes of its two loads inside the row (columns 32s + l and 32s + 16 + l below
    width) and of its store (outputs 16s + l below ow)."""
    steps = -(-ow // LANES)
    lane = np.arange(LANES)
    bits = np.uint32(1) << lane.astype(np.uint32)
    s = np.arange(steps)[:, None]
    table = np.empty((steps, 3), dtype=np.uint16)
    table[:, 0] = ((32 * s + lane < width) * bits).sum(axis=1)
    table[:, 1] = ((32 * s + 16 + lane < width) * bits).sum(axis=1)
    table[:, 2] = ((16 * s + lane < ow) * bits).sum(axis=1)
    return table
