"""Depthwise 2-D convolution (group == channels), the MobileNet/ShuffleNet layer.

im2col + matmul is wasteful here (one input channel per group), so each output
plane is accumulated directly: for every kernel tap, a row-wise multiply-add.
The numpy reference is `depthwise_conv2d_reference` below.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

from onnxexec.kernels.activations import act_row
from onnxexec.kernels.parallel import parallel_for

_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1, 1), dtype=np.float32)


@nb.njit(parallel=True, cache=True, nogil=True)
def _depthwise_conv2d(xp, w, sh, sw, dh, dw, out):
    """out[n, m, i, j] = sum_{a, b} xp[n, m // mult, i*sh + a*dh, j*sw + b*dw] * w[m, a, b].

    xp (N, C, Hp, Wp) padded input, w (M, KH, KW) with M = C * mult, out (N, M, OH, OW)
    zero-filled, all the same float dtype.
    """
    n_b, m, oh, ow = out.shape
    mult = m // xp.shape[1]
    kh, kw = w.shape[1], w.shape[2]
    for nm in nb.prange(n_b * m):  # each (n, m) writes only its own plane: no races
        n = nm // m
        oc = nm % m
        ic = oc // mult
        for i in range(oh):
            for a in range(kh):
                r = i * sh + a * dh
                for b in range(kw):
                    wv = w[oc, a, b]
                    c0 = b * dw
                    for j in range(ow):
                        out[n, oc, i, j] += xp[n, ic, r, c0 + j * sw] * wv


def depthwise_conv2d(
    xp: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
) -> np.ndarray:
    """Padded xp (N, C, Hp, Wp) * w (C * mult, 1, KH, KW) -> (N, C * mult, OH, OW)."""
    if xp.ndim != 4 or w.ndim != 4 or w.shape[1] != 1 or w.shape[0] % xp.shape[1]:
        raise ValueError(f"depthwise: bad shapes x {list(xp.shape)}, w {list(w.shape)}")
    if xp.dtype not in (np.float32, np.float64):
        raise ValueError(f"depthwise: float32/float64 only, got {xp.dtype}")
    oh, ow = out_hw
    kh, kw = w.shape[2:]
    need_h = (oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1
    need_w = (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1
    if need_h > xp.shape[2] or need_w > xp.shape[3]:
        raise ValueError(f"depthwise: input {list(xp.shape)} too small for output {oh}x{ow}")
    out = np.zeros((xp.shape[0], w.shape[0], oh, ow), dtype=xp.dtype)
    wk = np.ascontiguousarray(w[:, 0], dtype=xp.dtype)
    _depthwise_conv2d(
        np.ascontiguousarray(xp), wk, strides[0], strides[1], dilations[0], dilations[1], out
    )
    return out


def depthwise_conv2d_reference(
    xp: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
) -> np.ndarray:
    """numpy reference for depthwise_conv2d: one strided slab per kernel tap."""
    c = xp.shape[1]
    mult = w.shape[0] // c
    oh, ow = out_hw
    out = np.zeros((xp.shape[0], w.shape[0], oh, ow), dtype=xp.dtype)
    src = np.repeat(xp, mult, axis=1)  # output channel m reads input channel m // mult
    for a in range(w.shape[2]):
        for b in range(w.shape[3]):
            r0, c0 = a * dilations[0], b * dilations[1]
            slab = src[
                :,
                :,
                r0 : r0 + (oh - 1) * strides[0] + 1 : strides[0],
                c0 : c0 + (ow - 1) * strides[1] + 1 : strides[1],
            ]
            out += slab * w[:, 0, a, b].reshape(1, -1, 1, 1)
    return out


_BLOCK = 1024  # virtual output elements per block: the accumulator stays in L1


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _dw_fused(x, w, bias, has_bias, z, has_z, sh, sw, ph, pw, dh, dw, out, m0, m1, code, al, be):
    """Planes m0..m1 of out[m] = act(sum_{a,b} w[m, a, b] * xpad[m // mult] + bias[m] + z[m]).

    x (C, H, W), w (M, KH, KW), out / z (M, OH, OW), all float32. Each input plane is
    copied once into a zero-bordered scratch split by stride phase,
    xq[u, v, R, T] = xpad[R * sh + u, T * sw + v]; the output is computed at the phase
    width wq ("virtual" columns j >= OW are junk, dropped on the way out), so tap (a, b)
    reads one contiguous run: virtual output p = i * wq + j takes
    xq[(a*dh) % sh, (b*dw) % sw].flat[p + ((a*dh) // sh) * wq + (b*dw) // sw].
    The borders are zeroed once per call and never written, so each plane only copies
    its interior.
    """
    c_in, height, width = x.shape
    mult = out.shape[0] // c_in
    oh, ow = out.shape[1], out.shape[2]
    kh, kw = w.shape[1], w.shape[2]
    hq = max(height + ph, (oh - 1) * sh + (kh - 1) * dh + 1) // sh + 1
    wq = max(width + pw, (ow - 1) * sw + (kw - 1) * dw + 1) // sw + 1
    xq = np.zeros((sh, sw, hq * wq), dtype=np.float32)
    rows_per_block = max(1, min(oh, _BLOCK // wq))
    acc = np.empty(rows_per_block * wq, dtype=np.float32)
    tmp = np.empty(rows_per_block * wq, dtype=np.float32)
    scratch = np.empty(rows_per_block * wq, dtype=np.int32)
    a32, b32 = np.float32(al), np.float32(be)
    fast3 = kh == 3 and kw == 3
    # tap (a, b): phase plane index and flat offset
    tap_u = np.empty(kh * kw, dtype=np.int64)
    tap_v = np.empty(kh * kw, dtype=np.int64)
    tap_o = np.empty(kh * kw, dtype=np.int64)
    for a in range(kh):
        for b in range(kw):
            t = a * kw + b
            tap_u[t], tap_v[t] = (a * dh) % sh, (b * dw) % sw
            tap_o[t] = ((a * dh) // sh) * wq + (b * dw) // sw
    last_c = -1
    for m in range(m0, m1):
        c = m // mult
        if c != last_c:
            for v in range(sw):
                # input column x lands at padded column x + pw = T * sw + v
                u0 = (v - pw) % sw
                t0 = (u0 + pw) // sw
                n = (width - u0 + sw - 1) // sw if width > u0 else 0
                for r in range(height):
                    pr = r + ph
                    base = (pr // sh) * wq + t0
                    dst = xq[pr % sh, v, base : base + n]
                    if sw == 1:  # a contiguous slice: the copy vectorizes
                        src1 = x[c, r, u0 : u0 + n]
                        for t in range(n):
                            dst[t] = src1[t]
                    else:
                        src = x[c, r, u0 : u0 + (n - 1) * sw + 1 : sw]
                        for t in range(n):
                            dst[t] = src[t]
            last_c = c
        b0 = bias[m] if has_bias else np.float32(0.0)
        for i0 in range(0, oh, rows_per_block):
            i1 = min(oh, i0 + rows_per_block)
            p0 = i0 * wq
            n = (i1 - i0 - 1) * wq + ow
            e = acc[:n]
            # slices, never offset indices: an offset index makes numba check for
            # negative wrap-around and the loop stops vectorizing
            if fast3:
                s0 = xq[tap_u[0], tap_v[0], p0 + tap_o[0] : p0 + tap_o[0] + n]
                s1 = xq[tap_u[1], tap_v[1], p0 + tap_o[1] : p0 + tap_o[1] + n]
                s2 = xq[tap_u[2], tap_v[2], p0 + tap_o[2] : p0 + tap_o[2] + n]
                s3 = xq[tap_u[3], tap_v[3], p0 + tap_o[3] : p0 + tap_o[3] + n]
                s4 = xq[tap_u[4], tap_v[4], p0 + tap_o[4] : p0 + tap_o[4] + n]
                s5 = xq[tap_u[5], tap_v[5], p0 + tap_o[5] : p0 + tap_o[5] + n]
                s6 = xq[tap_u[6], tap_v[6], p0 + tap_o[6] : p0 + tap_o[6] + n]
                s7 = xq[tap_u[7], tap_v[7], p0 + tap_o[7] : p0 + tap_o[7] + n]
                s8 = xq[tap_u[8], tap_v[8], p0 + tap_o[8] : p0 + tap_o[8] + n]
                w0, w1, w2 = w[m, 0, 0], w[m, 0, 1], w[m, 0, 2]
                w3, w4, w5 = w[m, 1, 0], w[m, 1, 1], w[m, 1, 2]
                w6, w7, w8 = w[m, 2, 0], w[m, 2, 1], w[m, 2, 2]
                # two passes: LLVM vectorizes a loop only when its runtime alias checks
                # (one per written/read array pair) stay under 8
                for p in range(n):
                    e[p] = (b0 + (w0 * s0[p] + w1 * s1[p] + w2 * s2[p])) + (
                        w3 * s3[p] + w4 * s4[p] + w5 * s5[p]
                    )
                for p in range(n):
                    e[p] += w6 * s6[p] + w7 * s7[p] + w8 * s8[p]
            else:
                for p in range(n):
                    e[p] = b0
                for t in range(kh * kw):
                    wv = w[m, t // kw, t % kw]
                    src = xq[tap_u[t], tap_v[t], p0 + tap_o[t] : p0 + tap_o[t] + n]
                    for p in range(n):
                        e[p] += wv * src[p]
            if not has_z:
                act_row(e, code, a32, b32, tmp, scratch)
            for i in range(i0, i1):
                orow = out[m, i]
                er = acc[(i - i0) * wq : (i - i0) * wq + ow]
                if has_z:
                    zr = z[m, i]
                    for j in range(ow):
                        orow[j] = er[j] + zr[j]
                    act_row(orow, code, a32, b32, tmp, scratch)
                else:
                    for j in range(ow):
                        orow[j] = er[j]


def depthwise2d_fused(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    strides: Sequence[int],
    pads_begin: Sequence[int],
    dilations: Sequence[int],
    out: np.ndarray,
    act: int = 0,
    alpha: float = 0.0,
    beta: float = 0.0,
    z: np.ndarray | None = None,
) -> np.ndarray:
    """out (N, M, OH, OW) = act(depthwise(x) + bias + z), float32: x (N, C, H, W) C-contiguous,
    w (M, 1, KH, KW) with M = C * mult; pads_begin (top, left), the bottom / right padding
    being whatever out's size implies. Planes are split across the kernel thread pool."""
    n, m, oh, ow = out.shape
    wk = w.reshape(m, w.shape[2], w.shape[3])
    if wk.dtype != np.float32 or not wk.flags.c_contiguous:
        wk = np.ascontiguousarray(wk, dtype=np.float32)
    b = _NO_BIAS if bias is None else bias
    sh, sw = int(strides[0]), int(strides[1])
    ph, pw = int(pads_begin[0]), int(pads_begin[1])
    dh, dw = int(dilations[0]), int(dilations[1])
    # a span should be worth waking a worker for (~30k multiply-adds)
    per_plane = oh * ow * wk.shape[1] * wk.shape[2]
    min_chunk = max(1, 32768 // max(per_plane, 1))
    for i in range(n):
        xi, oi = x[i], out[i]
        zi = _NO_Z if z is None else z[i]

        def planes(m0: int, m1: int, xi=xi, oi=oi, zi=zi) -> None:
            _dw_fused(
                xi, wk, b, bias is not None, zi, z is not None,
                sh, sw, ph, pw, dh, dw, oi, m0, m1, act, alpha, beta,
            )  # fmt: skip

        parallel_for(planes, m, min_chunk=min_chunk)
    return out
