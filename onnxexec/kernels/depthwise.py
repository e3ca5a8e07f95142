"""Depthwise 2-D convolution (group == channels), the MobileNet/ShuffleNet layer.

im2col + matmul is wasteful here (one input channel per group), so each output
plane is accumulated directly. `depthwise2d_fused` is the float32 kernel of the
fused Conv (bias, residual and activation applied on the way out, planes split
across the kernel thread pool); `depthwise_conv2d` is the plain one the Conv handler
uses for float32/float64; the numpy reference is `depthwise_conv2d_reference`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba as nb
import numpy as np

from onnxexec.kernels.activations import act_row
from onnxexec.kernels.parallel import parallel_for

_NO_BIAS = np.zeros(1, dtype=np.float32)
_NO_Z = np.zeros((1, 1), dtype=np.float32)


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


_DW_SPAN_MACS = 32768  # multiply-adds a span needs to be worth waking a worker for
_BLOCK = 1024  # virtual output elements per block: the accumulator stays in L1
U = np.uint64


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _dw_fused(x, w, bias, has_bias, z, has_z, geo, out, m0, m1, code, al, be):
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
    xq = np.zeros(sh * sw * plane, dtype=np.float32)
    rows_per_block = max(1, min(oh, _BLOCK // wq))
    acc = np.empty(rows_per_block * wq, dtype=np.float32)
    tmp = np.empty(rows_per_block * wq, dtype=np.float32)
    scratch = np.empty(rows_per_block * wq, dtype=np.int32)
    a32, b32 = np.float32(al), np.float32(be)
    fast3 = kh == 3 and kw == 3
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
    last_c = -1
    for m in range(m0, m1):
        c = m // mult
        if c != last_c:
            xs = x[c]
            for r in range(height):
                s0 = U(r * width)
                if sw == 1:
                    d0 = row0[r] + U(pw)
                    for t in range(width):
                        xq[d0 + U(t)] = xs[s0 + U(t)]
                elif sw == 2:  # constant stride: LLVM deinterleaves with shuffles
                    d0, d1 = row0[r] + pe0 + te0, row0[r] + pe1 + te1
                    for k in range(half):
                        xq[d0 + U(k)] = xs[s0 + U(2) * U(k)]
                        xq[d1 + U(k)] = xs[s0 + U(2) * U(k) + U(1)]
                    if odd:
                        xq[d0 + U(half)] = xs[s0 + U(width - 1)]
                else:
                    for col in range(width):
                        pc = col + pw
                        xq[row0[r] + U((pc % sw) * plane + pc // sw)] = xs[s0 + U(col)]
            last_c = c
        b0 = bias[m] if has_bias else np.float32(0.0)
        om = out[m]
        for i0 in range(0, oh, rows_per_block):
            i1 = min(oh, i0 + rows_per_block)
            p0 = U(i0 * wq)
            n = (i1 - i0 - 1) * wq + ow
            e = acc[:n]
            if fast3:
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
                for p in range(n):
                    e[p] = b0
                for t in range(kh * kw):
                    wv = w[m, t]
                    o = p0 + tap[t]
                    for p in range(n):
                        q = U(p)
                        e[q] += wv * xq[o + q]
            if has_z:
                zm = z[m]
                for i in range(i0, i1):
                    orow = om[i * ow : (i + 1) * ow]
                    er = acc[(i - i0) * wq : (i - i0) * wq + ow]
                    zr = zm[i * ow : (i + 1) * ow]
                    for j in range(ow):
                        orow[j] = er[j] + zr[j]
                    act_row(orow, code, a32, b32, tmp, scratch)
                continue
            act_row(e, code, a32, b32, tmp, scratch)
            for i in range(i0, i1):
                q0, e0 = U(i * ow), U((i - i0) * wq)
                for j in range(ow):
                    om[q0 + U(j)] = acc[e0 + U(j)]


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
    wk = w.reshape(m, w.shape[2] * w.shape[3])
    if wk.dtype != np.float32 or not wk.flags.c_contiguous:
        wk = np.ascontiguousarray(wk, dtype=np.float32)
    b = _NO_BIAS if bias is None else bias
    c, height, width = x.shape[1:]
    geo = (height, width, oh, ow, *w.shape[2:], *strides[:2], *pads_begin[:2], *dilations[:2])
    geo = tuple(int(v) for v in geo)
    per_plane = oh * ow * wk.shape[1]
    min_chunk = max(1, _DW_SPAN_MACS // max(per_plane, 1))
    has_b, has_z = bias is not None, z is not None
    for i in range(n):
        xi, oi = x[i].reshape(c, height * width), out[i].reshape(m, oh * ow)
        zi = _NO_Z if z is None else z[i].reshape(m, oh * ow)

        def planes(m0: int, m1: int, xi=xi, oi=oi, zi=zi) -> None:
            _dw_fused(xi, wk, b, has_b, zi, has_z, geo, oi, m0, m1, act, alpha, beta)

        parallel_for(planes, m, min_chunk=min_chunk)
    return out
