"""MatMulNBits (4 bits, block 32, accuracy_level 4) on the GGUF path's lanes kernels.

A MatMulNBits block is w = (q - zp) * s (ContribOperators.md), i.e. Q4_1's form
w = d * q + m with d = s, m = -zp * s kept in float32 (qmv_nib's MIN kind, whose
scales are float32 lanes arrays). accuracy_level 4 is onnxruntime's CompInt8: A is
quantized per block of 32 to int8 with scale amax / 127 (MLAS QuantizeARow_CompInt8)
and each block's product is an integer sum scaled by s * scale_a; with the zero point
folded as m * scale_a * sum(qa) that is the kernel's MIN epilogue. The activation
scales here stay float32 as in MLAS (actquant.quantize_act rounds them to half as ggml
does), so the result differs from onnxruntime only in float summation order.

The lanes weight is built once per node at planning time (MatMulNBits' `prepare` hook,
ops/registry.py), held by the plan's step and freed with the session; a call whose
weight is not a planned constant builds it for that call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxexec.kernels.math.lanes import to_lanes
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.qmatmul import QWeight, qmatmul_q, with_arrays
from onnxexec.kernels.quant.qmv_nib import MIN


def supported(
    b: np.ndarray, zero_points: np.ndarray | None, bits: int, block_size: int, level: int, k: int
) -> bool:
    """True when the lanes path computes this node (else the numpy reference does)."""
    return (
        bits == 4
        and block_size == q.QK
        and level == 4
        and k % q.QK == 0
        and b.dtype == np.uint8
        and (zero_points is None or zero_points.dtype == np.uint8)
    )


def _prepare(b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None, n: int, k: int) -> QWeight:
    nb = k // q.QK
    raw = np.ascontiguousarray(b).reshape(n, nb, 16)
    # MatMulNBits packs value 2i low / 2i+1 high; the lanes layout wants value j low
    # and j + 16 high (ggml's block_q4_1 order).
    vals = np.stack([raw & 15, raw >> 4], axis=-1).reshape(n, nb, 32)
    qs = (vals[..., :16] | (vals[..., 16:] << 4)).astype(np.uint8)
    s = np.asarray(scales, np.float32).reshape(n, nb)
    if zp is None:
        z = np.full((n, nb), 8.0, np.float32)
    else:
        zb = zp.reshape(n, -1)
        z = np.stack([zb & 15, zb >> 4], axis=-1).reshape(n, -1)[:, :nb].astype(np.float32)
    arrays = {
        "qs": to_lanes(np.ascontiguousarray(qs)),
        "qh": np.zeros((0, 0, 0, 0), np.int16),
        "fsc": to_lanes(np.stack([s, -z * s], axis=-1)),
        "usc": np.zeros((1, 1, 1, 1), np.uint8),
        "kind": MIN,
        "off": 0,
    }
    return with_arrays(QWeight(q.Q4_1, (n, k), "nib", {}), (n, k), arrays)


@dataclass(frozen=True)
class NbitsState:
    """A MatMulNBits node's planned lanes weight and the constants it was built from."""

    b: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None
    weight: QWeight

    def owns(self, b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None) -> bool:
        return b is self.b and scales is self.scales and zp is self.zero_points


def prepare(b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None, n: int, k: int) -> NbitsState:
    """The lanes weight for constant B, scales and zero points (see `supported`)."""
    return NbitsState(b, scales, zp, _prepare(b, scales, zp, n, k))


def _quantize_act(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x (T, K) -> xq (T, K) int16, xst (T, 3, K/32): float32 scale, scale * sum q, sum q."""
    t, k = x.shape
    blocks = x.reshape(t, k // q.QK, q.QK)
    scale = np.abs(blocks).max(axis=-1) / np.float32(127)
    inv = np.divide(np.float32(1), scale, out=np.zeros_like(scale), where=scale != 0)
    xq = np.rint(blocks * inv[..., None]).astype(np.int16)
    sq = xq.sum(axis=-1, dtype=np.int32).astype(np.float32)
    xst = np.ascontiguousarray(np.stack([scale, scale * sq, sq], axis=1), dtype=np.float32)
    return xq.reshape(t, k), xst


def matmul_lanes(
    a: np.ndarray,
    b: np.ndarray,
    scales: np.ndarray,
    zp: np.ndarray | None,
    n: int,
    k: int,
    state: NbitsState | None = None,
) -> np.ndarray:
    """float32 A (..., K) @ W^T -> (..., N) float32 through qmatmul_q."""
    owned = state is not None and state.owns(b, scales, zp)
    w = state.weight if state is not None and owned else _prepare(b, scales, zp, n, k)
    x = np.ascontiguousarray(a, np.float32).reshape(-1, k)
    xq, xst = _quantize_act(x)
    out = np.empty((x.shape[0], n), np.float32)
    qmatmul_q(xq, xst, w, out)
    return out.reshape(*a.shape[:-1], n)
