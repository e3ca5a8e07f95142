"""MatMulNBits (4 bits, accuracy_level 4) on the GGUF path's int8 matvec kernels.

A MatMulNBits block is w = (q - zp) * s (ContribOperators.md), with blocks of 32, 64
or 128 values along K. At planning time (the `prepare` hook, ops/registry.py) the
weight is repacked into kernels/quant's lanes layout of ggml blocks of 32 (a 64 or
128 block becomes 2 or 4 of them sharing its scale), with the scales kept in float32:
- symmetric (no zero points, or all equal to the default 8): Q4_0's form d * (q - 8)
  (qmv_nib's SYM kind, off = 8), so each block's product is the exact integer sum of
  (q - 8) * qa scaled by s * scale_a, what onnxruntime computes;
- with zero points: Q4_1's form d * q + m with d = s, m = -zp * s (the MIN kind).
accuracy_level 4 is onnxruntime's CompInt8: A is quantized per MatMulNBits block to
int8 with a float32 scale (kernels/quant/nbits_act.py), so the result differs from
onnxruntime's only in float summation order. accuracy_level 0 (float A) takes qmatmul's
float mode on the same weight: cache-sized panels dequantized (d * (q - 8), or
d * q + m) and multiplied with BLAS, never a whole float32 copy of W.

The kernels run single-threaded over spans of 64-row groups taken by the native pool
(native/parallel.parallel_for), whose caller never waits for a worker that has not
started, where a numba parallel region waits for all of its threads. While other
processes hold our cores (ops/contention.free_cores, as the GGUF decode ops do) the
calling thread takes every span: on a loaded 2-core host a 2M multiply-add matvec
took a median 0.8 ms as a numba parallel region, 0.26 ms over the pool and 0.17 ms
on one thread (interleaved, load average 12).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from onnxexec.kernels.math.lanes import LANES, to_lanes
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.nbits_act import quantize_act_blocks
from onnxexec.kernels.quant.qgemm_exact import GEMM_EXACT, GEMM_MIN_T
from onnxexec.kernels.quant.qmatmul import QWeight, int8_kernels, qmatmul, with_arrays
from onnxexec.kernels.quant.qmv_nib import MIN, SYM
from onnxexec.native.parallel import parallel_for
from onnxexec.ops.contention import free_cores

BLOCKS: Final = (32, 64, 128)
SPAN_MACS: Final = 1 << 18  # multiply-adds a span must hold to be worth a hand-off
# From this many multiply-adds (a few ms, prompts) spans go to the pool even while other
# processes hold our cores: a late worker then delays a small part of a long product
# (109-row prompt, (2048, 1024) weight, load 15: 103 ms median on one thread, 63 ms
# as a numba parallel region).
BUSY_MACS: Final = 1 << 24


def supported(
    b: np.ndarray, zero_points: np.ndarray | None, bits: int, block_size: int, level: int, k: int
) -> bool:
    """True when the lanes path computes this node (else the numpy reference does)."""
    return (
        bits == 4
        and block_size in BLOCKS
        and level in (0, 4)
        and k % block_size == 0
        and b.dtype == np.uint8
        and (zero_points is None or zero_points.dtype == np.uint8)
    )


def _nibbles(packed: np.ndarray, n: int) -> np.ndarray:
    """uint8 (n, m) -> (n, 2m) values, element 2i the low nibble of byte i."""
    p = packed.reshape(n, -1)
    return np.stack([p & 15, p >> 4], axis=-1).reshape(n, -1)


def _prepare(
    b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None, n: int, k: int, block: int
) -> QWeight:
    nb = k // q.QK
    rep = block // q.QK  # ggml blocks per MatMulNBits block
    vals = _nibbles(np.ascontiguousarray(b), n)[:, :k].reshape(n, nb, q.QK)
    # lanes / ggml block order: value j in the low nibble of byte j, j + 16 in the high
    qs = (vals[..., :16] | (vals[..., 16:] << 4)).astype(np.uint8)
    s = np.repeat(np.asarray(scales, np.float32).reshape(n, -1)[:, : k // block], rep, axis=1)
    z = None if zp is None else _nibbles(zp, n)[:, : k // block]
    if z is None or bool((z == 8).all()):
        t, kind, off, fsc = q.Q4_0, SYM, 8, s[..., None]
    else:
        zf = np.repeat(z.astype(np.float32), rep, axis=1)
        t, kind, off, fsc = q.Q4_1, MIN, 0, np.stack([s, -zf * s], axis=-1)
    arrays = {
        "qs": to_lanes(np.ascontiguousarray(qs)),
        "qh": np.zeros((0, 0, 0, 0), np.int16),
        "fsc": to_lanes(np.ascontiguousarray(fsc)),
        "usc": np.zeros((1, 1, 1, 1), np.uint8),
        "kind": kind,
        "off": off,
    }
    return with_arrays(QWeight(t, (n, k), "nib", {}), (n, k), arrays)


@dataclass(frozen=True)
class NbitsState:
    """A MatMulNBits node's planned lanes weight and the constants it was built from."""

    b: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None
    block: int
    weight: QWeight

    def owns(self, b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None) -> bool:
        return b is self.b and scales is self.scales and zp is self.zero_points


def prepare(
    b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None, n: int, k: int, block: int = 32
) -> NbitsState:
    """The lanes weight for constant B, scales and zero points (see `supported`)."""
    return NbitsState(b, scales, zp, block, _prepare(b, scales, zp, n, k, block))


def matmul_lanes(
    a: np.ndarray,
    b: np.ndarray,
    scales: np.ndarray,
    zp: np.ndarray | None,
    n: int,
    k: int,
    state: NbitsState | None = None,
    block: int = 32,
    level: int = 4,
) -> np.ndarray:
    """float32 A (..., K) @ W^T -> (..., N) float32: int8 activations (level 4) or
    float ones (level 0)."""
    if state is not None and state.owns(b, scales, zp) and state.block == block:
        w = state.weight
    else:
        w = _prepare(b, scales, zp, n, k, block)
    x = a.reshape(-1, k)
    if x.shape[0] == 0:
        return np.zeros((*a.shape[:-1], n), np.float32)
    if level == 0:
        return qmatmul(x, w, mode="float").reshape(*a.shape[:-1], n)
    xq, xst = quantize_act_blocks(x, block)
    t_rows = x.shape[0]
    out = np.empty((t_rows, n), np.float32)
    qs, qh, fsc, usc, kind, off = w.args
    groups = qs.shape[0]
    # min_chunk = groups keeps the whole product on this thread
    shared = t_rows * n * k >= BUSY_MACS or free_cores()
    min_chunk = max(1, SPAN_MACS // (t_rows * LANES * k)) if shared else groups
    if t_rows >= GEMM_MIN_T:
        _prompt(xq, xst, w, out, min_chunk)
        return out.reshape(*a.shape[:-1], n)
    kern = int8_kernels(w)[1]  # the serial twin: spans are shared out below

    def span(g0: int, g1: int) -> None:
        kern(qs[g0:g1], qh, fsc[g0:g1], usc, kind, off, xq, xst, out[:, g0 * LANES : g1 * LANES], 1)

    parallel_for(span, groups, min_chunk=min_chunk)
    return out.reshape(*a.shape[:-1], n)


def _prompt(xq: np.ndarray, xst: np.ndarray, w: QWeight, out: np.ndarray, min_chunk: int) -> None:
    """out = W . x for GEMM_MIN_T rows or more on qgemm_exact's tiled kernel (each weight
    block unpacked once per 16 rows). Its Q4 values are the raw nibbles q, so for the
    symmetric form the (q - 8) is applied after: out -= 8 * (xd * sum xq) @ d^T over
    blocks, a product K / 32 times smaller (the MIN form's m * xs term, in float32)."""
    qs, qh, fsc, _, kind, _ = w.args
    xf = xq.astype(np.float32)
    kern = GEMM_EXACT[1]

    def span(g0: int, g1: int) -> None:
        cols = out[:, g0 * LANES : g1 * LANES]
        kern(qs[g0:g1], qh, fsc[g0:g1], 0, xf, xst, cols, 1)

    parallel_for(span, qs.shape[0], min_chunk=min_chunk)
    if kind == SYM:
        n, nb = out.shape[1], qs.shape[1]
        d = fsc[:, :, 0, :].transpose(0, 2, 1).reshape(-1, nb)[:n]  # (N, K/32)
        out -= np.float32(8) * (xst[:, 1] @ d.T)  # xst[:, 1] = xd * sum xq
