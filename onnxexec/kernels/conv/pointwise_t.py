"""The 1x1 convolution of a small output, y (M, P) = act(W (M, C) @ X (C, P) + bias + z),
in tiles of pixels x channels, against W^T packed in 32-channel panels (sgemm_packed.
pack's layout, (ceil(M/32), C, 32); kernels/conv/pointwise_small.py packs and dispatches).

The other 1x1 paths tile 12 channels x 32 pixels, so a 7 x 7 output (49 pixels) fills
two 32-pixel panels a quarter empty. Here a tile is R pixels (R <= 12, the rows of a
GEMM against a packed weight in MLAS's SgemmKernelAvx512F layout: sgemm_packed) x 32
output channels: per input channel k, two loads of W^T's row k (32 channels, masked
past M), R broadcasts of X[k, p0 + r] (R consecutive floats of row k) and 2 R fused
multiply-adds into 2 R zmm accumulators. The pixels split into tiles of equal height
(49: 10, 10, 10, 10, 9), so nothing is computed that is not stored; onnxruntime's
NCHWc pointwise kernel also broadcasts pixels against channel vectors. A panel's first
tile prefetches the next panel's rows.

The tile is a (pixel, channel) block of y's transpose: it adds the bias (a channel
vector), the residual (gathered), clamps for Relu / Clip and scatters each pixel's 32
channels into y's column p (lane j at y[m0 + j, p]). Measured single-threaded on this
AVX-512 VM: 54-62 GMAC/s on MobileNetV2's 7 x 7 and 14 x 14 shapes, against 40-48 for
the 32-pixel panels (kernels/conv/pointwise_packed.py); the scatter is ~10% of a 7 x 7
layer's time (stores in its place, giving wrong results, measured 55 -> 60 GMAC/s).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.conv.direct_job import AVAILABLE as AVAILABLE
from onnxexec.kernels.conv.direct_job import MR, rows_asm
from onnxexec.kernels.conv.dw_asm import clobber_list
from onnxexec.kernels.objload import intrinsic

NC: Final = 32  # output channels per tile (two zmm); MR (12) pixels at most

# the tile's parameter block (int64): X at the tile's first pixel and the bytes between
# input channels (4 P), the tile's panel and the bytes between its rows (128), C, y at
# (m0, p0), the residual at the same place or 0, the bias at m0 or 0, the (low, high)
# clamp pair or 0, the address of the scatter indices (int32 j * P, j < 16), the lane
# masks of the tile's channels (bits 0-15: m0 .. m0 + 15 below M, bits 16-31: the next
# 16) and the prefetch's distance in bytes (0: none)
TX, TLDX, TW, TLDW, TK, TY, TZ, TBIAS, TCLAMP, TIDX, TMASK, TPF = range(12)
NPARAMS: Final = 12


def _asm_tile(rows: int) -> str:
    """AT&T text of one tile of `rows` pixels x 32 channels: accumulators zmm0..zmm23
    (pixel r: 2r, 2r + 1), W^T's row in zmm24 / zmm25, pixel broadcasts in zmm26 /
    zmm27, the scatter indices in zmm28; k1 / k2 the channel lanes, k3 a gather /
    scatter's mask (those instructions clear it)."""
    acc = [f"%zmm{i}" for i in range(2 * rows)]
    out = [f"vpxord {a}, {a}, {a}" for a in acc]
    out += [f"kmovw {8 * TMASK}($0), %k1", f"kmovw {8 * TMASK + 2}($0), %k2"]
    out += [f"mov {8 * TX}($0), %rax", f"mov {8 * TLDX}($0), %r12"]
    out += [f"mov {8 * TW}($0), %rdx", f"mov {8 * TLDW}($0), %r13", f"mov {8 * TK}($0), %rcx"]
    out += [f"mov {8 * TPF}($0), %r14"]
    out += ["test %rcx, %rcx", "jle 2f", "1:"]
    # masked loads: W^T's last row ends at the panel's last channel below M
    out += ["vmovups (%rdx), %zmm24{%k1}{z}", "vmovups 64(%rdx), %zmm25{%k2}{z}"]
    out += ["prefetcht0 (%rdx,%r14)", "prefetcht0 64(%rdx,%r14)", "add %r13, %rdx"]
    for r in range(rows):
        t = 26 + r % 2
        out.append(f"vbroadcastss {4 * r}(%rax), %zmm{t}")
        out.append(f"vfmadd231ps %zmm24, %zmm{t}, {acc[2 * r]}")
        out.append(f"vfmadd231ps %zmm25, %zmm{t}, {acc[2 * r + 1]}")
    out += ["add %r12, %rax", "dec %rcx", "jnz 1b", "2:"]
    out += [f"mov {8 * TIDX}($0), %rsi", "vmovdqu32 (%rsi), %zmm28"]
    out += [f"mov {8 * TBIAS}($0), %rsi", "test %rsi, %rsi", "jz 3f"]
    out += ["vmovups (%rsi), %zmm26{%k1}{z}", "vmovups 64(%rsi), %zmm27{%k2}{z}"]
    for r in range(rows):
        out += [f"vaddps %zmm26, {acc[2 * r]}, {acc[2 * r]}"]
        out += [f"vaddps %zmm27, {acc[2 * r + 1]}, {acc[2 * r + 1]}"]
    # the second 16 channels sit 16 rows of y (16 * 4 P bytes) after the first
    halves = ["mov %r12, %rdi", "shl $$4, %rdi", "add %rsi, %rdi"]
    out += ["3:", f"mov {8 * TZ}($0), %rsi", "test %rsi, %rsi", "jz 4f", *halves]
    for r in range(rows):
        for h, (base, k) in enumerate((("%rsi", "%k1"), ("%rdi", "%k2"))):
            a, t = acc[2 * r + h], f"%zmm{26 + h}"
            out += [f"kmovw {k}, %k3", f"vgatherdps {4 * r}({base},%zmm28,4), {t}{{%k3}}"]
            out += [f"vaddps {t}, {a}, {a}"]
    out += ["4:", f"mov {8 * TCLAMP}($0), %rsi", "test %rsi, %rsi", "jz 5f"]
    out += ["vbroadcastss (%rsi), %zmm26", "vbroadcastss 4(%rsi), %zmm27"]
    for a in acc:  # the accumulator second: a NaN stays NaN, as numpy's maximum
        out += [f"vmaxps {a}, %zmm26, {a}", f"vminps {a}, %zmm27, {a}"]
    out += ["5:", f"mov {8 * TY}($0), %rsi", *halves]
    for r in range(rows):
        for h, (base, k) in enumerate((("%rsi", "%k1"), ("%rdi", "%k2"))):
            to = f"{4 * r}({base},%zmm28,4){{%k3}}"
            out += [f"kmovw {k}, %k3", f"vscatterdps {acc[2 * r + h]}, {to}"]
    out.append("vzeroupper")
    return "\n\t".join(out)


_CLOBBERS = clobber_list(
    ("%rax", "%rcx", "%rdx", "%rsi", "%rdi", "%r12", "%r13", "%r14"), range(29), range(1, 4)
)


@intrinsic
def _tile(typingctx, rows, params):
    """The rows x 32 tile described by the parameter block at address `params`, rows
    in 1..MR (one of MR inline-assembly bodies; nothing on hosts without AVX-512)."""
    return rows_asm(_asm_tile, _CLOBBERS, "pt")


def pixel_tiles(p: int) -> int:
    """How many tiles of equal height (at most MR pixels) p pixels split into."""
    return -(-p // MR)


@nb.njit(nogil=True, cache=True)
def pwt_span(x, wt, y, bias, z, clamp, c, m, p, u0, u1):
    """Units [u0, u1) of y (M, P) = clamp(W (M, C) @ X (C, P) + bias + z): unit u is
    channel panel u // T x pixel tile u % T (T = pixel_tiles(p)); x, wt (W^T's
    panels, (ceil(M/32), C, 32)), y, bias, z are addresses of C-contiguous float32
    arrays (bias / z / clamp 0 when absent; clamp: a (low, high) pair's address)."""
    tiles = -(-p // MR)  # pixel_tiles(p)
    base, extra = divmod(p, tiles)
    params = np.zeros(NPARAMS, dtype=np.int64)
    idx = np.empty(16, dtype=np.int32)
    for j in range(16):
        idx[j] = j * p
    params[TLDX], params[TLDW], params[TK] = 4 * p, 4 * NC, c
    params[TCLAMP], params[TIDX] = clamp, idx.ctypes.data
    p_at = params.ctypes.data
    for u in range(u0, u1):
        q, t = divmod(u, tiles)
        p0 = t * base + min(t, extra)
        rows = base + (t < extra)
        m0 = q * NC
        live = min(NC, m - m0)
        params[TMASK] = (1 << live) - 1
        params[TX] = x + 4 * p0
        params[TW] = wt + 4 * m0 * c
        # the panel's first tile fetches the next panel's rows as it goes: from L3
        # in a model run, where the weights of the layers between evicted them
        params[TPF] = 4 * NC * c if t == 0 and u + tiles < u1 else 0
        params[TY] = y + 4 * (m0 * p + p0)
        params[TZ] = z + 4 * (m0 * p + p0) if z else 0
        params[TBIAS] = bias + 4 * m0 if bias else 0
        _tile(rows, p_at)
    return idx.shape[0] + params.shape[0]  # the blocks the tiles read live to here


# ----- the span a pool thread runs ---------------------------------------------------
# Job arguments (slots of the pool's int64 array): the addresses of X, W^T, y, the
# bias or 0, the residual or 0, the clamp pair or 0, then C, M, P. Spans are unit
# ranges (pwt_span).
JX, JW, JY, JBIAS, JZ, JCLAMP, JC, JM, JP = range(9)
JOB_ARGS: Final = 9


@nb.njit(nogil=True, cache=True)
def pwt_job(a, fa, s0, s1):
    """Span [s0, s1) of the job in slots `a` (above); fa unused (no float arguments)."""
    pwt_span(a[JX], a[JW], a[JY], a[JBIAS], a[JZ], a[JCLAMP], a[JC], a[JM], a[JP], s0, s1)


def units(m: int, p: int) -> int:
    """The job's unit count: channel panels x pixel tiles."""
    return -(-m // NC) * pixel_tiles(p)
