"""The 3x3 depthwise kernel's inner loop as one AVX-512 inline-assembly run
(kernels/depthwise_planes.py calls it for each block of virtual output pixels), its
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

from typing import Any, Final

import numpy as np
from llvmlite import ir  # IR builders only (pure Python): LLVM itself is not loaded

from onnxexec.kernels import when_imported
from onnxexec.kernels.objload import host_cpu_flags, intrinsic, jit_disabled, lazy_module

types = lazy_module("numba.core.types")
_FEATURES = host_cpu_flags()
AVAILABLE: Final = not jit_disabled() and "avx512f" in _FEATURES
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


_CLOBBERS = ",".join(
    [f"~{{{r[1:]}}}" for r in _TAPS]
    + ["~{r12}", "~{r13}"]
    + [f"~{{zmm{i}}}" for i in (0, *range(16, 28))]
    + ["~{memory}", "~{dirflag}", "~{fpsr}", "~{flags}"]
)


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


_MASKED_CLOBBERS = ",".join(
    [f"~{{{r[1:]}}}" for r in _TAPS]
    + ["~{r12}", "~{r13}", "~{r14}"]
    + [f"~{{zmm{i}}}" for i in (0, *range(16, 28))]
    + [f"~{{k{i}}}" for i in range(1, 8)]
    + ["~{memory}", "~{dirflag}", "~{fpsr}", "~{flags}"]
)


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


_ROW_CLOBBERS = ",".join(
    [f"~{{{r}}}" for r in ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")]
    + ["~{zmm0}", "~{k1}", "~{memory}", "~{dirflag}", "~{fpsr}", "~{flags}"]
)


@intrinsic
def rows_copy(typingctx, params):
    """Copy the rows the block at address `params` describes (AVX-512 hosts; elsewhere
    nothing, and callers keep their numba loops). A numba loop over a 7- or 14-float
    row is scalar: with these copies in and out of the phase planes a 960 x 7 x 7
    depthwise call went from 83 to 73 us on one thread (384 x 14 x 14: 76 to 57)."""
    return _block_asm(_asm_rows(), _ROW_CLOBBERS)
