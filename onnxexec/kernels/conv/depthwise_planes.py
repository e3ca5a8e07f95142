"""The fused depthwise kernel's plane loops and their native-pool job.

`dw_inplace` takes the common MobileNet layer (3x3, stride 1, one pixel of padding,
Relu / Clip) on AVX-512 hosts: a masked run over each plane as it is (dw_asm.
dw9_masked_run). Measured on 2 threads: 960 x 7 x 7 55 -> 25 us, 384 x 14 x 14
44 -> 28, 144 x 56 x 56 188 -> 139, 32 x 112 x 112 168 -> 113. `dw_fused` takes
the rest through zero-padded, stride-phase-split copies of the planes.

kernels/conv/depthwise.py's `depthwise2d_fused` splits the output planes into spans. With
2+ threads a span runs as a native job of the pool (native/parallel.py, KIND_DW):
the workers call `dw_span` without the GIL, where a Python job made every worker
take the GIL to start and to finish its span, which cost MobileNetV2 more than the
second thread gained (its 2-thread run was slower than its 1-thread run). This
module imports nothing from parallel.py, which dispatches to `dw_span`.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels import tuning
from onnxexec.kernels.activation_kinds import Activation
from onnxexec.kernels.conv.dw_asm import AVAILABLE as DW_ASM
from onnxexec.kernels.conv.dw_asm import (
    CDST,
    CDSTRIDE,
    CPARAMS,
    CROWS,
    CSRC,
    CSSTRIDE,
    CWIDTH,
    LANES,
    NMPARAMS,
    NPARAMS,
    NS2PARAMS,
    PBIAS,
    PCLAMP,
    PDST,
    PMASK,
    PSRC,
    PSTEPS,
    PW,
    S2BIAS,
    S2CLAMP,
    S2DST,
    S2IDX,
    S2INSTRIDE,
    S2MASK,
    S2OUTSTRIDE,
    S2ROWS,
    S2SRC,
    S2STEPS,
    S2W,
    dw9_masked_run,
    dw9_run,
    dw9_s2_run,
    rows_copy,
)
from onnxexec.kernels.intrinsics import f32_ptr
from onnxexec.kernels.math.activations import act_row

_BLOCK = tuning.DEPTHWISE_BLOCK  # virtual output elements per block: the accumulator stays in L1
U = np.uint64


@nb.njit(nogil=True, cache=True, error_model="numpy")
def dw_fused(x, w, bias, has_bias, z, has_z, geo, out, m0, m1, code, al, be):
    """Planes m0..m1 of out[m] = act(sum_{a,b} w[m, a, b] * xpad[m // mult] + bias[m] + z[m]).

    x (C, H*W), w (M, KH*KW), out / z (M, OH*OW), all float32; geo = (H, W, OH, OW, KH,
    KW, sh, sw, ph, pw, dh, dw). Each input plane is copied once into a zero-bordered scratch
    split by stride phase, plane (u, v) holding xpad[R * sh + u, T * sw + v] at R * wq + T;
    the output is computed at the phase width wq ("virtual" columns j >= OW are junk,
    dropped on the way out), so tap (a, b) reads one contiguous run: virtual output
    p = i * wq + j takes plane ((a*dh) % sh, (b*dw) % sw) at p + ((a*dh) // sh) * wq +
    (b*dw) // sw. The borders are zeroed once per call and never written, so each plane
    only copies its interior.

    Inner loops index with uint64 (U): a signed index makes numba test for negative
    wrap-around on every access, which keeps LLVM from vectorizing (3-6x slower copies).
    Every operand of an index expression must be U: mixing U and int64 gives float64.
    """
    height, width, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = geo
    mult = out.shape[0] // x.shape[0]
    hq = max(height + ph, (oh - 1) * sh + (kh - 1) * dh + 1) // sh + 1
    wq = max(width + pw, (ow - 1) * sw + (kw - 1) * dw + 1) // sw + 1
    plane = hq * wq
    xq = np.zeros(sh * sw * plane + LANES, dtype=np.float32)  # + the asm run's overreach
    rows_per_block = max(1, min(oh, _BLOCK // wq))
    acc = np.empty(rows_per_block * wq + LANES, dtype=np.float32)
    tmp = np.empty(rows_per_block * wq, dtype=np.float32)
    scratch = np.empty(rows_per_block * wq, dtype=np.int32)
    a32, b32 = np.float32(al), np.float32(be)
    fast3 = kh == 3 and kw == 3
    # the AVX-512 run (dw_asm) takes the 3x3 blocks, with Relu / Clip as its clamp
    # unless a residual must come first; other activations run after it
    run = fast3 and DW_ASM
    params = np.zeros(NPARAMS, dtype=np.int64)
    clamp = np.empty(2, dtype=np.float32)
    clamp[0], clamp[1] = np.float32(-np.inf), np.float32(np.inf)
    if not has_z and code == Activation.RELU:
        clamp[0] = np.float32(0.0)
    elif not has_z and code == Activation.CLIP:
        clamp[0], clamp[1] = a32, b32
    clamped = run and not has_z and (code == Activation.RELU or code == Activation.CLIP)
    zero = np.zeros(1, dtype=np.float32)
    params[PDST] = acc.ctypes.data
    params[PCLAMP] = clamp.ctypes.data
    # addresses taken once: each .ctypes in numba holds a reference to its array, an
    # atomic increment and decrement per use (18% of a 32 x 112 x 112 call when
    # taken per block)
    xq_at, w_at, params_at = xq.ctypes.data, w.ctypes.data, params.ctypes.data
    bias_at = bias.ctypes.data if has_bias else zero.ctypes.data
    tap = np.empty(kh * kw, dtype=np.uint64)  # tap (a, b): start of its run in xq
    for a in range(kh):
        for b in range(kw):
            u, v = (a * dh) % sh, (b * dw) % sw
            tap[a * kw + b] = (u * sw + v) * plane + ((a * dh) // sh) * wq + (b * dw) // sw
    # where padded row r + ph starts (its row phase plane and row in it); integer
    # division per row would cost more than copying a short row
    row0 = np.empty(height, dtype=np.uint64)
    for r in range(height):
        row0[r] = ((r + ph) % sh) * sw * plane + ((r + ph) // sh) * wq
    # input column x lands at padded column x + pw = T * sw + v: for the column parity
    # e = x % 2 (stride 2), the phase plane and T of x = 2k + e are (pe[e], k + te[e])
    pe0, pe1 = U((pw % 2) * plane), U(((pw + 1) % 2) * plane)
    te0, te1 = U(pw // 2), U((pw + 1) // 2)
    half, odd = width // 2, width % 2
    # flat views made once: a row slice per plane (x[c], out[m]) would be another
    # atomic reference-count pair, 23% of a 960 x 7 x 7 call
    xf, of, zf = x.reshape(-1), out.reshape(-1), z.reshape(-1)
    hw, ohw = U(height * width), U(oh * ow)
    # on AVX-512 the row copies in (stride 1) and out are masked vector runs too
    copy_in = run and sh == 1 and sw == 1
    cin = np.empty(CPARAMS, dtype=np.int64)
    cin[CDST], cin[CROWS], cin[CWIDTH] = xq_at + 4 * (ph * wq + pw), height, width
    cin[CSSTRIDE], cin[CDSTRIDE] = 4 * width, 4 * wq
    cout = np.empty(CPARAMS, dtype=np.int64)
    cout[CSRC], cout[CWIDTH], cout[CSSTRIDE], cout[CDSTRIDE] = acc.ctypes.data, ow, 4 * wq, 4 * ow
    x_at, out_at = x.ctypes.data, out.ctypes.data
    cin_at, cout_at = cin.ctypes.data, cout.ctypes.data
    last_c = -1
    for m in range(m0, m1):
        c = m // mult
        if c != last_c and copy_in:
            cin[CSRC] = x_at + 4 * c * (height * width)
            rows_copy(cin_at)
            last_c = c
        elif c != last_c:
            xs = U(c) * hw
            for r in range(height):
                s0 = xs + U(r * width)
                if sw == 1:
                    d0 = row0[r] + U(pw)
                    for t in range(width):
                        xq[d0 + U(t)] = xf[s0 + U(t)]
                elif sw == 2:  # constant stride: LLVM deinterleaves with shuffles
                    d0, d1 = row0[r] + pe0 + te0, row0[r] + pe1 + te1
                    for k in range(half):
                        xq[d0 + U(k)] = xf[s0 + U(2) * U(k)]
                        xq[d1 + U(k)] = xf[s0 + U(2) * U(k) + U(1)]
                    if odd:
                        xq[d0 + U(half)] = xf[s0 + U(width - 1)]
                else:
                    for col in range(width):
                        pc = col + pw
                        xq[row0[r] + U((pc % sw) * plane + pc // sw)] = xf[s0 + U(col)]
            last_c = c
        b0 = bias[m] if has_bias else np.float32(0.0)
        om = U(m) * ohw
        for i0 in range(0, oh, rows_per_block):
            i1 = min(oh, i0 + rows_per_block)
            p0 = U(i0 * wq)
            n = (i1 - i0 - 1) * wq + ow
            if run:
                for t in range(9):
                    params[PSRC + t] = xq_at + 4 * (p0 + tap[t])
                params[PSTEPS] = -(-n // LANES)
                params[PW] = w_at + 4 * m * 9
                params[PBIAS] = bias_at + 4 * m if has_bias else bias_at
                dw9_run(params_at)
            elif fast3:
                e = acc[:n]
                o0, o1, o2 = p0 + tap[0], p0 + tap[1], p0 + tap[2]
                o3, o4, o5 = p0 + tap[3], p0 + tap[4], p0 + tap[5]
                o6, o7, o8 = p0 + tap[6], p0 + tap[7], p0 + tap[8]
                w0, w1, w2 = w[m, 0], w[m, 1], w[m, 2]
                w3, w4, w5 = w[m, 3], w[m, 4], w[m, 5]
                w6, w7, w8 = w[m, 6], w[m, 7], w[m, 8]
                # two passes: LLVM vectorizes a loop only when its runtime alias checks
                # (one per written/read pointer pair) stay under 8
                for p in range(n):
                    q = U(p)
                    e[q] = (b0 + (w0 * xq[o0 + q] + w1 * xq[o1 + q] + w2 * xq[o2 + q])) + (
                        w3 * xq[o3 + q] + w4 * xq[o4 + q] + w5 * xq[o5 + q]
                    )
                for p in range(n):
                    q = U(p)
                    e[q] += w6 * xq[o6 + q] + w7 * xq[o7 + q] + w8 * xq[o8 + q]
            else:
                e = acc[:n]
                for p in range(n):
                    e[p] = b0
                for t in range(kh * kw):
                    wv = w[m, t]
                    o = p0 + tap[t]
                    for p in range(n):
                        q = U(p)
                        e[q] += wv * xq[o + q]
            if has_z:  # the residual comes before the activation
                for i in range(i0, i1):
                    q0, e0 = om + U(i * ow), U((i - i0) * wq)
                    for j in range(ow):
                        acc[e0 + U(j)] += zf[q0 + U(j)]
            if not clamped:
                act_row(acc[:n], code, a32, b32, tmp, scratch)
            if run:
                cout[CDST], cout[CROWS] = out_at + 4 * (m * oh * ow + i0 * ow), i1 - i0
                rows_copy(cout_at)
                continue
            for i in range(i0, i1):
                q0, e0 = om + U(i * ow), U((i - i0) * wq)
                for j in range(ow):
                    of[q0 + U(j)] = acc[e0 + U(j)]
    # the blocks the run reads only by address (clamp pair, zero bias) live to here:
    # numba frees an array after its last use in the code, and these two had none
    # after their addresses were taken, so dw9_run read freed memory (wrong sums once
    # the allocator reused it: seen under glibc's MALLOC_CHECK_=3, tools/memcheck.sh)
    return clamp.shape[0] + zero.shape[0]


@nb.njit(nogil=True, cache=True)
def _clamp_pair(code, al, be):
    """The (low, high) clamp of activation NONE, RELU or CLIP (Activation)."""
    clamp = np.empty(2, dtype=np.float32)
    clamp[0], clamp[1] = np.float32(-np.inf), np.float32(np.inf)
    if code == Activation.RELU:
        clamp[0] = np.float32(0.0)
    elif code == Activation.CLIP:
        clamp[0], clamp[1] = np.float32(al), np.float32(be)
    return clamp


@nb.njit(nogil=True, cache=True)
def dw_inplace(x, w, bias, has_bias, width, out, m0, m1, code, al, be, masks_at, steps):
    """Planes m0..m1 of a 3x3, stride 1, pad 1 depthwise conv with no activation, Relu
    or Clip (code 0 / 1 / 7) over width-wide planes, read and written in place by
    dw9_masked_run: no padded copy in and no compaction out, which were most of a
    7x7 or 14x14 plane's time. x (C, H*W), w (M, 9), out (M, H*W) float32; masks_at:
    the address of dw_asm.tap_masks(H, W), `steps` rows long."""
    hw = out.shape[1]
    mult = out.shape[0] // x.shape[0]
    params = np.zeros(NMPARAMS, dtype=np.int64)
    clamp = _clamp_pair(code, al, be)
    zero = np.zeros(1, dtype=np.float32)
    x_at, w_at, out_at = x.ctypes.data, w.ctypes.data, out.ctypes.data
    bias_at = bias.ctypes.data if has_bias else zero.ctypes.data
    params[PCLAMP], params[PMASK], params[PSTEPS] = clamp.ctypes.data, masks_at, steps
    params_at = params.ctypes.data
    for m in range(m0, m1):
        src = x_at + 4 * (m // mult) * hw
        for a in range(3):
            for b in range(3):
                params[PSRC + 3 * a + b] = src + 4 * ((a - 1) * width + b - 1)
        params[PDST] = out_at + 4 * m * hw
        params[PW] = w_at + 36 * m
        params[PBIAS] = bias_at + 4 * m if has_bias else bias_at
        dw9_masked_run(params_at)
    # the blocks the run reads by address live to here
    return params.shape[0] + clamp.shape[0] + zero.shape[0]


@nb.njit(nogil=True, cache=True)
def dw_inplace_s2(x, w, bias, has_bias, geo, out, m0, m1, code, al, be, masks_at, steps):
    """Planes m0..m1 of a 3x3, stride 2, pad-begin 1 depthwise conv with no activation,
    Relu or Clip, read and written in place by dw9_s2_run, output row by output row:
    the padded copy split by stride phase (dw_fused) wrote and read the whole input
    again. x (C, H*W), w (M, 9), out (M, OH*OW) float32; geo as dw_fused's; masks_at:
    the address of dw_asm.s2_masks(W, OW), `steps` rows long."""
    height, width, oh, ow = geo[0], geo[1], geo[2], geo[3]
    hw, ohw = height * width, oh * ow
    mult = out.shape[0] // x.shape[0]
    params = np.zeros(NS2PARAMS, dtype=np.int64)
    clamp = _clamp_pair(code, al, be)
    idx = np.empty(32, dtype=np.int32)  # vpermi2ps's evens, then odds
    for k in range(16):
        idx[k], idx[16 + k] = 2 * k, 2 * k + 1
    zero = np.zeros(width + 1, dtype=np.float32)  # a tap row in the padding
    x_at, w_at, out_at, zero_at = x.ctypes.data, w.ctypes.data, out.ctypes.data, zero.ctypes.data
    bias_at = bias.ctypes.data if has_bias else zero_at
    params[S2CLAMP], params[S2MASK], params[S2STEPS] = clamp.ctypes.data, masks_at, steps
    params[S2IDX], params[S2INSTRIDE], params[S2OUTSTRIDE] = idx.ctypes.data, 8 * width, 4 * ow
    params_at = params.ctypes.data
    body_end = min(oh, (height - 2) // 2 + 1)  # rows 1 .. body_end - 1: all three taps inside
    for m in range(m0, m1):
        src, dst = x_at + 4 * (m // mult) * hw, out_at + 4 * m * ohw
        params[S2W] = w_at + 36 * m
        params[S2BIAS] = bias_at + 4 * m if has_bias else bias_at
        i = 0
        while i < oh:
            rows = body_end - i if 1 <= i < body_end else 1
            for a in range(3):
                r = 2 * i + a - 1
                params[S2SRC + a] = src + 4 * r * width if 0 <= r < height else zero_at
            params[S2DST], params[S2ROWS] = dst + 4 * i * ow, rows
            dw9_s2_run(params_at)
            i += rows
    return params.shape[0] + clamp.shape[0] + idx.shape[0] + zero.shape[0]


# ----- the depthwise span a pool thread runs ---------------------------------------
# Job arguments, as slots of the pool's int64 array (alpha / beta in its float64
# array): addresses of x (C, H*W), w (M, KH*KW), out (M, OH*OW) (float32, C-contiguous),
# of bias (M,) and the residual z (M, OH*OW) or 0 when absent, C, M, the activation
# code, the 12 geometry values of dw_fused, then the address of the in-place run's
# mask table (0: the padded-plane path) and its steps. Spans are ranges of planes.
DX, DW, DOUT, DBIAS, DZ, DC, DM, DACT, DGEO = range(9)
DMASK, DSTEPS = DGEO + 12, DGEO + 13
DW_ARGS = DGEO + 14
NO_BIAS = np.zeros(1, dtype=np.float32)
NO_Z = np.zeros((1, 1), dtype=np.float32)


@nb.njit(nogil=True, cache=True)
def dw_span(a, fa, m0, m1):
    """Output planes [m0, m1) of the depthwise job in slots `a` (above)."""
    g = a[DGEO : DGEO + 12]
    geo = (g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11])
    c, m = a[DC], a[DM]
    x = nb.carray(f32_ptr(a[DX]), (c, g[0] * g[1]))
    w = nb.carray(f32_ptr(a[DW]), (m, g[4] * g[5]))
    out = nb.carray(f32_ptr(a[DOUT]), (m, g[2] * g[3]))
    has_b, has_z = a[DBIAS] != 0, a[DZ] != 0
    bias = nb.carray(f32_ptr(a[DBIAS]), (m,)) if has_b else NO_BIAS
    if a[DMASK] != 0 and g[6] == 2:
        dw_inplace_s2(
            x, w, bias, has_b, geo, out, m0, m1, a[DACT], fa[0], fa[1], a[DMASK], a[DSTEPS]
        )
        return
    if a[DMASK] != 0:
        dw_inplace(x, w, bias, has_b, g[1], out, m0, m1, a[DACT], fa[0], fa[1], a[DMASK], a[DSTEPS])
        return
    z = nb.carray(f32_ptr(a[DZ]), (m, g[2] * g[3])) if has_z else NO_Z
    dw_fused(x, w, bias, has_b, z, has_z, geo, out, m0, m1, a[DACT], fa[0], fa[1])
