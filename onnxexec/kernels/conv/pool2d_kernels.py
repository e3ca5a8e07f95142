"""The numba kernels of kernels/conv/pool2d.py (its docstring says how they work) and the
max pool's native pool job. This module imports nothing from parallel.py, which
loads the job's span kernel through span_fns.py."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels import objload as nb
from onnxexec.kernels.intrinsics import f32_ptr

U = np.uint64  # unsigned indices: no negative-index wraparound check in the loops


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _tap_range(base, d, n, k):
    """[lo, hi) of taps t in range(k) with 0 <= base + t * d < n."""
    lo = 0
    if base < 0:
        lo = (-base + d - 1) // d
    hi = k
    if base + (k - 1) * d >= n:
        hi = (n - base + d - 1) // d if n > base else 0
    if hi < lo:
        hi = lo
    return lo, hi


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _out_range(off, s, n, o):
    """[lo, hi) of output positions j in range(o) with 0 <= j * s + off < n."""
    lo = 0
    if off < 0:
        lo = (-off + s - 1) // s
    hi = (n - off + s - 1) // s if n > off else 0
    if hi > o:
        hi = o
    if lo > hi:
        lo = hi
    return lo, hi


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _phases(xf, xb, w, sw, buf):
    """The row xf[xb : xb + w] split by position mod sw, so that a strided tap reads
    contiguously: (src, base) with src[base + q * L + m] = row[m * sw + q], L = ceil(w / sw).
    A stride-1 row is read in place."""
    if sw == 1:
        return xf, xb
    n = (w + sw - 1) // sw
    for q in range(sw):
        for m in range((w - q + sw - 1) // sw):
            buf[U(q * n + m)] = xf[U(xb + m * sw + q)]
    return buf, 0


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _col_taps(kw, sw, dw, pw, w, ow):
    """Per horizontal tap b: first output column, column count, and the offset of that
    column's input in a _phases row (taps outside the input are clipped away)."""
    n = (w + sw - 1) // sw
    jlo = np.empty(kw, np.int64)
    cnt = np.empty(kw, np.int64)
    src = np.empty(kw, np.int64)
    for b in range(kw):
        off = b * dw - pw
        lo, hi = _out_range(off, sw, w, ow)
        jlo[b] = lo
        cnt[b] = hi - lo
        src[b] = (off % sw) * n + off // sw + lo
    return jlo, cnt, src


@nb.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _vmax(o, v):
    """max(o, v) as a select that vectorizes; a NaN v wins and a NaN o stays, so NaN
    propagates like np.maximum in the generic path."""
    return v if (v > o) | (v != v) else o


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _hmax_row(xf, xb, w, kw, sw, dw, pw, ow, hm, hb):
    """hm[hb + j] = max over b of row[j*sw + b*dw - pw] (taps on the row only), row =
    xf[xb : xb + w]. Interior columns (every tap in range) take a loop the compiler
    vectorizes: the common 2x2 / 3x3 stride-2 windows with all taps loaded in one
    iteration (a stride-2 interleaved load), others one contiguous-ish pass per tap."""
    span = (kw - 1) * dw + 1
    ja = min((pw + sw - 1) // sw, ow)
    jb = (w - span + pw) // sw + 1 if w - span + pw >= 0 else 0
    jb = max(min(jb, ow), ja)
    ninf = np.float32(-np.inf)
    for e in range(ow - (jb - ja)):  # the clipped edge columns, [0, ja) and [jb, ow)
        j = e if e < ja else e + jb - ja
        base = j * sw - pw
        lo, hi = _tap_range(base, dw, w, kw)
        m = ninf
        for b in range(lo, hi):
            m = _vmax(m, xf[U(xb + base + b * dw)])
        hm[U(hb + j)] = m
    x0 = xb - pw
    if sw == 2 and dw == 1 and kw == 3:
        for j in range(ja, jb):
            s0 = x0 + 2 * j
            m = _vmax(xf[U(s0)], xf[U(s0 + 1)])
            hm[U(hb + j)] = _vmax(m, xf[U(s0 + 2)])
    elif sw == 2 and dw == 1 and kw == 2:
        for j in range(ja, jb):
            s0 = x0 + 2 * j
            hm[U(hb + j)] = _vmax(xf[U(s0)], xf[U(s0 + 1)])
    else:
        for j in range(ja, jb):
            hm[U(hb + j)] = xf[U(x0 + j * sw)]
        for b in range(1, kw):
            s0 = x0 + b * dw
            for j in range(ja, jb):
                hm[U(hb + j)] = _vmax(hm[U(hb + j)], xf[U(s0 + j * sw)])


@nb.njit(cache=True, nogil=True, error_model="numpy")
def max2d(xf, h, w, geo, out, oh, ow, p0, p1):
    """Max pool of planes [p0, p1): xf flat (P, H, W), out flat (P, OH, OW).

    Separable: each input row is reduced over the horizontal taps into hm, whose rows
    are stored grouped by r mod sh (slot r // sh), so that one vertical tap over all
    output rows reads one contiguous run: row i * sh + e sits at slot i + e // sh of
    group e mod sh."""
    kh, kw, sh, sw, dh, dw, ph, pw = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    slots = (h + sh - 1) // sh
    hm = np.empty(sh * slots * ow, np.float32)
    ninf = np.float32(-np.inf)
    for p in range(p0, p1):
        for r in range(h):
            hb = ((r % sh) * slots + r // sh) * ow
            _hmax_row(xf, (p * h + r) * w, w, kw, sw, dw, pw, ow, hm, hb)
        d0 = p * oh * ow
        for t in range(oh * ow):
            out[U(d0 + t)] = ninf
        for a in range(kh):
            e = a * dh - ph
            ilo, ihi = _out_range(e, sh, h, oh)
            s0 = ((e % sh) * slots + ilo + e // sh) * ow
            o0 = d0 + ilo * ow
            for t in range((ihi - ilo) * ow):
                out[U(o0 + t)] = _vmax(out[U(o0 + t)], hm[U(s0 + t)])


@nb.njit(cache=True, nogil=True, error_model="numpy")
def max2d_indices(x, geo, column_major, out, idx, p0, p1):
    """Max pool and the flat (whole-tensor) index of each window's first maximum."""
    kh, kw, sh, sw, dh, dw, ph, pw = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    h, w = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    ninf = np.float32(-np.inf)
    for p in range(p0, p1):
        xp = x[p]
        plane = p * h * w
        for i in range(oh):
            hb = i * sh - ph
            alo, ahi = _tap_range(hb, dh, h, kh)
            for j in range(ow):
                wb = j * sw - pw
                blo, bhi = _tap_range(wb, dw, w, kw)
                best = ninf
                arg = 0  # tap 0, a padding tap unless it is in range (then set below)
                for a in range(alo, ahi):
                    r = hb + a * dh
                    for b in range(blo, bhi):
                        v = xp[r, wb + b * dw]
                        t = a * kw + b
                        # a NaN beats any number (first NaN wins): NaN propagates on
                        # every max pool path, as np.maximum does (ops/pool.py)
                        if t == 0 or v > best or (v != v and best == best):
                            best = v
                            arg = t
                ta, tb = arg // kw, arg % kw
                r, c = hb + ta * dh, wb + tb * dw
                out[p, i, j] = best
                idx[p, i, j] = plane + (c * h + r if column_major else r * w + c)


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _tap_counts(o, s, d, n, k, pb, pe, include_pad):
    """Per output position along one axis: its taps on real input, or with
    count_include_pad on [-pb, n + pe)."""
    counts = np.empty(o, np.float32)
    for j in range(o):
        if include_pad:
            lo, hi = _tap_range(j * s, d, n + pb + pe, k)
        else:
            lo, hi = _tap_range(j * s - pb, d, n, k)
        counts[j] = hi - lo
    return counts


@nb.njit(cache=True, nogil=True, error_model="numpy")
def avg2d(xf, h, w, geo, include_pad, out, oh, ow, p0, p1):
    """Average pool of planes [p0, p1) (flat like max2d); geo also holds the end pads."""
    kh, kw, sh, sw, dh, dw, ph, pw = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    pe_h, pe_w = geo[8], geo[9]
    jlo, cnt, tsrc = _col_taps(kw, sw, dw, pw, w, ow)
    buf = np.empty(w + sw, np.float32)
    # divisor factors per output column / row: taps on real input, or with
    # count_include_pad on [-pad_begin, n + pad_end)
    cw = _tap_counts(ow, sw, dw, w, kw, pw, pe_w, include_pad)
    ch = _tap_counts(oh, sh, dh, h, kh, ph, pe_h, include_pad)
    for p in range(p0, p1):
        for i in range(oh):
            d0 = (p * oh + i) * ow
            for j in range(ow):
                out[U(d0 + j)] = 0.0
            base = i * sh - ph
            alo, ahi = _tap_range(base, dh, h, kh)
            for a in range(alo, ahi):
                src, sb = _phases(xf, (p * h + base + a * dh) * w, w, sw, buf)
                for b in range(kw):  # taps in row-major order, as the generic path sums
                    s0, o0 = sb + tsrc[b], d0 + jlo[b]
                    for t in range(cnt[b]):
                        out[U(o0 + t)] += src[U(s0 + t)]
            for j in range(ow):
                out[U(d0 + j)] /= ch[i] * cw[j]


# The max pool's native job (parallel.KIND_POOL): slots of the pool's int64 array hold
# the addresses of x and out (flat float32 planes), the plane count, H, W, OH, OW and
# the 10 geometry values of _geo; spans are ranges of planes. As a Python job each
# worker took the GIL to start (ResNet-50's 64 x 112 x 112 pool: 421 us on one
# thread, 358 on two).
MX, MOUT, MPLANES, MH, MW, MOH, MOW, MGEO = range(8)
POOL_ARGS = MGEO + 10


@nb.njit(nogil=True, cache=True)
def maxpool_span(a, fa, p0, p1):
    """Planes [p0, p1) of the max pool job in slots `a` (above)."""
    planes, h, w, oh, ow = a[MPLANES], a[MH], a[MW], a[MOH], a[MOW]
    xf = nb.carray(f32_ptr(a[MX]), (planes * h * w,))
    out = nb.carray(f32_ptr(a[MOUT]), (planes * oh * ow,))
    max2d(xf, h, w, a[MGEO : MGEO + 10], out, oh, ow, p0, p1)
