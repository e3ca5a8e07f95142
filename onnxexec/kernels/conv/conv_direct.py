"""KxK and 1x1 float32 convolution on the direct micro-kernel of kernels/conv/direct_job.py:
the zero-padded input split by stride phase (1x1: the input as it is), then tiles of
12 output channels x 32 output pixels accumulated over every tap and input channel
in registers, bias / residual / Relu / Clip applied before the one store.

Where it runs (`use_direct`, measured on ResNet-50 / MobileNetV2 shapes against the
tap-GEMM, im2row and im2col paths on one and two threads): AVX-512 hosts, KxK
kernels with stride 1, and strided ones whose phase planes are cheap to build (few
input channels, like the 7x7 and 3x3 stems, or small planes). The weight must be
stored OHWI (passes/conv_layout.py re-stores constant weights that way).
References: tests/unit/kernels/conv/test_conv_direct.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.conv import direct_job as dj
from onnxexec.kernels.conv.conv_taps import phase_planes, split_phases
from onnxexec.native.launch import run_job
from onnxexec.native.parallel import KIND_DIRECT, MAX_SPANS, native_pool, num_threads, recorded

f32 = np.float32
_PARALLEL_MACS = tuning.CONV_DIRECT_PARALLEL_MACS  # smaller convs stay on one thread
_SMALL_WEIGHT = tuning.CONV_DIRECT_SMALL_WEIGHT  # bytes: a weight every thread can read whole
_STRIDED_MAX_FLOATS = tuning.CONV_DIRECT_STRIDED_MAX_FLOATS
_STRIDED_MAX_CG = tuning.CONV_DIRECT_STRIDED_MAX_CG  # or with this few input channels (the stems)
_STRIDED_MID_FLOATS, _STRIDED_MID_OUT = (
    tuning.CONV_DIRECT_STRIDED_MID_FLOATS,
    tuning.CONV_DIRECT_STRIDED_MID_OUT,
)
_NO_BIAS = np.zeros(1, dtype=f32)
_NO_Z = np.zeros((1, 1), dtype=f32)
_ONE_SEG = np.zeros((1, 2), dtype=np.int64)  # unused by 1x1 jobs (their span builds it)


def use_direct(cg: int, kh: int, kw: int, sh: int, sw: int, height: int, width: int) -> bool:
    """Whether the direct kernel takes this KxK conv (see the module docstring)."""
    if not dj.AVAILABLE or kh * kw == 1:
        return False
    if sh == sw == 1:
        return True
    floats = cg * height * width
    if cg <= _STRIDED_MAX_CG or floats <= _STRIDED_MAX_FLOATS:
        return True
    # bigger planes pay off once the output fills its 32-pixel tiles well: ResNet-50's
    # 256 x 28 x 28 stride-2 layer 1.87 -> 1.41 ms on 2 threads (512 x 14 x 14, a 7x7
    # output, was 8% slower; 128 x 56 x 56, 1.8 MB of planes, even)
    return floats <= _STRIDED_MID_FLOATS and (height // sh) * (width // sw) >= _STRIDED_MID_OUT


def use_direct_pointwise(c: int, p: int) -> bool:
    """Whether the direct kernel takes a 1x1 conv of c input channels over p pixels:
    few input channels (a tile's input columns, c x 128 bytes, stay in L1) and many
    pixels (a partial last panel wastes little). Measured on ResNet-50 / MobileNetV2
    1x1 layers against the packed and BLAS paths: 0.5-0.9x their time there, and
    slower with 256+ input channels or 7x7 / 14x14 outputs."""
    return dj.AVAILABLE and (
        (c <= tuning.DIRECT_PW_MAX_C and p >= tuning.DIRECT_PW_MIN_P)
        or (c <= tuning.DIRECT_PW_MAX_C_SMALL and p >= tuning.DIRECT_PW_MIN_P_SMALL)
    )


@lru_cache(maxsize=256)
def _segments(
    kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, cg: int, hq: int, wq: int
) -> np.ndarray:
    seg = dj.segments(kh, kw, sh, sw, dh, dw, cg, hq, wq)
    seg.flags.writeable = False
    return seg


def conv_direct(
    xi: np.ndarray,
    c0: int,
    c1: int,
    w: np.ndarray,
    y: np.ndarray,
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    out_hw: Sequence[int],
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> None:
    """y (M, OH*OW) = act(conv(xi[c0:c1], w) + bias[:, None] + z) for one image xi
    (C, H, W) and w (M, KH, KW, Cg) C-contiguous (Cg = c1 - c0); blocks of output
    rows (or, for few blocks, tiles of channels) are split across the thread pool."""
    m, kh, kw, cg = w.shape
    oh, ow = out_hw
    sh, sw = strides[0], strides[1]
    # NR floats to spare: the last tile of junk columns reads up to NR - 1 past the end;
    # a recorded call (native/launch.py) splits into planes its replays will refill
    own = getattr(recorded, "jobs", None) is not None
    xq = phase_planes(
        xi, c0, c1, (kh, kw), strides, pads, dilations, out_hw, tail=dj.NR, own=own
    )  # fmt: skip
    s, _, hq, wq = xq.shape
    segs = _segments(kh, kw, sh, sw, dilations[0], dilations[1], cg, hq, wq)
    # a block's input window (all phases, its rows plus the kernel's reach) and its
    # output block (M x rows * wq) each about fill _L2_FLOATS
    reach = (kh - 1) * dilations[0] // sh + 1
    rpb = min(dj._L2_FLOATS // max(1, s * cg * wq) - reach, dj._L2_FLOATS // max(1, m * wq))
    rpb = max(1, min(oh, rpb))
    wrows = w.reshape(m, kh * kw * cg)
    if wrows.nbytes <= _SMALL_WEIGHT:  # split the rows, not the channels (see _run)
        rpb = min(rpb, -(-oh // (2 * num_threads())))
    blocks = -(-oh // rpb)
    prep = _Refill(xq, c0, c1, pads[0], pads[1], sh, sw) if own else None
    _run(
        (xq.ctypes.data, hq * wq, wrows, m, segs, wq, oh, ow, rpb, blocks, 0),
        y, bias, z, act, alpha, beta, m * cg * kh * kw * oh * ow, prep,
    )  # fmt: skip


def pointwise_direct(
    wm: np.ndarray,
    xm: np.ndarray,
    y: np.ndarray,
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
) -> None:
    """y (M, P) = act(wm (M, C) @ xm (C, P) + bias[:, None] + z), all C-contiguous
    float32: the one-tap case, reading xm in place (no junk columns)."""
    m, c = wm.shape
    p = xm.shape[1]
    # a block's input columns (C x cols) and outputs (M x cols) each stay in L2
    cpb = max(dj.NR, dj._L2_FLOATS // max(1, c, m) // dj.NR * dj.NR)
    if wm.nbytes <= _SMALL_WEIGHT:  # split the columns, not the channels (see _run)
        cpb = min(cpb, -(-p // (2 * num_threads() * dj.NR)) * dj.NR)
    blocks = -(-p // cpb)
    _run(
        (xm.ctypes.data, p, wm, m, _ONE_SEG, 1, 1, p, cpb, blocks, 1),
        y, bias, z, act, alpha, beta, m * c * p,
    )  # fmt: skip


class _Refill:
    """A replayed KxK job's prep (native/launch.py): the next input split into the
    phase planes the job reads (image 0: a replayed call has one image)."""

    __slots__ = ("args", "planes")

    def __init__(self, planes: np.ndarray, *args: int) -> None:
        self.planes, self.args = planes, args

    def __call__(self, x: np.ndarray) -> None:
        split_phases(x[0], *self.args, self.planes)


def _run(
    job: tuple,
    y: np.ndarray,
    bias: np.ndarray | None,
    z: np.ndarray | None,
    act: int,
    alpha: float,
    beta: float,
    macs: int,
    prep: _Refill | None = None,
) -> None:
    """Run a direct job: `job` = (x address, ldb, weight rows, M, segments, wq, OH, OW,
    rows or columns per block, blocks, 1 for 1x1), on this thread or split across the
    pool (blocks, or channel tiles when there are fewer than two blocks a thread)."""
    x, ldb, wrows, m, segs, wq, oh, ow, per, blocks, point = job
    has_b, has_z = bias is not None, z is not None
    bb = _NO_BIAS if bias is None else bias
    zz = _NO_Z if z is None else z
    clamp = dj.clamp_of(act, alpha, beta)
    ca = 0 if clamp is None else clamp.ctypes.data
    threads = num_threads()
    pool = native_pool() if threads > 1 and macs >= _PARALLEL_MACS else None
    if pool is None:
        if point:
            dj.pointwise_span(
                x, wrows, per, 0, 0, blocks, y, bb, has_b, zz, has_z, act, alpha, beta, ca
            )
        else:
            dj.direct_span(
                x, ldb, wrows, segs, wq, oh, ow, per, 0, 0, blocks, y, bb, has_b, zz, has_z,
                act, alpha, beta, ca,
            )  # fmt: skip
        return
    # few blocks: each thread takes tiles of channels, reading half the weight but
    # all of the input; callers with a small weight cut blocks small enough that the
    # threads split the input instead (a thread streaming a whole 1.2 MB input for
    # 12 of MobileNetV2's 24 output channels ran at a third of the speed)
    chans = blocks < 2 * threads
    units = -(-m // dj.MR) if chans else blocks
    parts = min(units, 2 * threads, MAX_SPANS)
    bounds = np.array([units * k // parts for k in range(parts + 1)], dtype=np.int64)
    try:
        args = (
            x, ldb, wrows.ctypes.data, m, wrows.shape[1], segs.ctypes.data, segs.shape[0],
            wq, oh, ow, per, int(chans), y.ctypes.data,
            0 if bias is None else bias.ctypes.data, 0 if z is None else z.ctypes.data,
            act, ca, point,
        )  # fmt: skip
        # a 1x1 job reads the node's input in place; a KxK one phase planes, which
        # a replay refills (prep) when they are the call's own, not thread scratch
        keep = (wrows, bias, segs, clamp) if point or prep else None
        run_job(pool, KIND_DIRECT, args, alpha, beta, bounds, keep=keep, prep=prep)
    finally:
        pool.busy.release()
