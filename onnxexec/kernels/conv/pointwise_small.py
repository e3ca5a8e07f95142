"""1x1 convolutions of small outputs on kernels/conv/pointwise_t.py's pixel x channel tiles:
where they run, the weight packed once for them, and the job that splits them over
the pool (ranges of (channel panel, pixel tile) units, panel-major).

The weight W (M, C, 1, 1) is packed into W^T's 32-channel panels (sgemm_packed.pack's
layout: (ceil(M/32), C, 32), zero past M, 64-byte aligned). A FusedConv node keeps them
in its prepared state (`Panels`, packed on the node's first small-output run and freed
with the session: a copy, ResNet-50's six 7 x 7 layers add 28 MB, MobileNetV2's 6 MB);
a caller without one packs per call.
Read as W^T's rows in place instead (a transposed view, no copy), every row of a panel
sits 4 M bytes from the last: with M = 1280 those rows fall into a few L1 sets and the
320 x 1280 layer ran 453 us against 372 packed (one thread).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.activation_kinds import CLAMPS
from onnxexec.kernels.conv import pointwise_t as pt
from onnxexec.kernels.conv.direct_job import clamp_of
from onnxexec.kernels.linalg.sgemm_packed import pack
from onnxexec.native.launch import run_job
from onnxexec.native.parallel import KIND_PWT, MAX_SPANS, native_pool, num_threads

# Outputs up to 7 x 7. On 2 threads of this AVX-512 VM, hot, against the paths they
# took before (32-pixel panels, OpenBLAS): MobileNetV2's 320 -> 1280 193 -> 168 us,
# 960 -> 160 86 -> 68, ResNet-50's 2048 -> 512 670 -> 450-515, 512 -> 2048 650 -> 570;
# whole MobileNetV2 runs interleaved in one process 7.24 -> 7.15 and 7.31 -> 7.05 ms.
# 14 x 14 layers were mixed (1024 -> 256 497 -> 442 us, but 96 -> 576 110 -> 128: the
# scatter of a large output costs more there) and, taken with the projections of 14 x
# 14 too, MobileNetV2 ran no faster in-model (7.51 -> 7.63, 7.39 -> 7.43 ms)
MAX_PIXELS: Final = tuning.POINTWISE_SMALL_MAX_PIXELS
_PARALLEL_MACS: Final = tuning.POINTWISE_SMALL_PARALLEL_MACS


def use_small(c: int, m: int, p: int, act: int) -> bool:
    """Whether a 1x1, stride-1, unpadded, ungrouped float32 conv of c -> m channels over
    p pixels takes this path: AVX-512, few pixels, and an activation the tiles apply
    (none, Relu or Clip)."""
    return pt.AVAILABLE and 0 < p <= MAX_PIXELS and act in CLAMPS and c > 0 and m > 0


def packed_weight(w: np.ndarray) -> np.ndarray:
    """W (M, C, 1, 1)'s W^T panels (a new array)."""
    m, c = w.shape[:2]
    return pack(np.ascontiguousarray(w.reshape(m, c).T, dtype=np.float32))


class Panels:
    """One constant weight's W^T panels, packed on the first `get` and kept by the
    holder (a plan step's prepared state), so they go with it."""

    __slots__ = ("_wp", "w")

    def __init__(self, w: np.ndarray) -> None:
        self.w = w
        self._wp: np.ndarray | None = None

    def get(self) -> np.ndarray:
        if self._wp is None:
            self._wp = packed_weight(self.w)
        return self._wp


def conv1x1_small(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    z: np.ndarray | None,
    out: np.ndarray,
    act: int,
    alpha: float,
    beta: float,
    panels: Panels | None = None,
) -> np.ndarray:
    """out (N, M, H, W) = act(conv1x1(x, w) + bias + z): x (N, C, H, W), bias (M,), z
    out's shape, all C-contiguous float32; act in CLAMPS (use_small). `panels`: w's
    packed panels kept by the caller (else packed here, for this call)."""
    n, c = x.shape[:2]
    m = out.shape[1]
    p = out.shape[2] * out.shape[3]
    wp = panels.get() if panels is not None and panels.w is w else packed_weight(w)
    clamp = clamp_of(act, alpha, beta)
    args = [
        0, wp.ctypes.data, 0, 0 if bias is None else bias.ctypes.data, 0,
        0 if clamp is None else clamp.ctypes.data, c, m, p,
    ]  # fmt: skip
    units = pt.units(m, p)
    pool = native_pool() if num_threads() > 1 and m * c * p >= _PARALLEL_MACS else None
    if pool is None:
        for i in range(n):
            pt.pwt_span(*_image(args, x, out, z, i), 0, units)
        return out
    try:
        parts = min(units, 2 * num_threads(), MAX_SPANS)
        bounds = np.array([units * k // parts for k in range(parts + 1)], dtype=np.int64)
        keep = (wp, bias, clamp) if n == 1 else None  # one job: the node's whole work
        for i in range(n):
            run_job(pool, KIND_PWT, _image(args, x, out, z, i), 0.0, 0.0, bounds, keep=keep)
    finally:
        pool.busy.release()
    return out


def _image(
    args: list[int], x: np.ndarray, out: np.ndarray, z: np.ndarray | None, i: int
) -> list[int]:
    """The job's slots for image i."""
    args[pt.JX], args[pt.JY] = x[i].ctypes.data, out[i].ctypes.data
    args[pt.JZ] = 0 if z is None else z[i].ctypes.data
    return args
