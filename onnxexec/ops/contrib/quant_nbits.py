"""com.microsoft block-quantized weights: MatMulNBits and GatherBlockQuantized.

Layouts from ContribOperators.md: values are bit-packed along K, low-order bits first
(for 4 bits: element 2i in the low nibble of byte i, 2i+1 in the high nibble); each
block of `block_size` values along K has one scale and one zero point, the default zero
point being 2^(bits-1) (MatMulNBits, uint8 GatherBlockQuantized) or 0 (int4 / uint4 data).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from onnxexec.ops.common import norm_axis
from onnxexec.ops.contrib import MS_DOMAIN, nbits_lanes
from onnxexec.ops.registry import op

_SMALL = (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))


def unpack_bits(packed: np.ndarray, bits: int) -> np.ndarray:
    """uint8 (..., n) -> uint8 (..., n * 8 // bits), low-order fields first."""
    if bits not in (2, 4, 8):
        raise ValueError(f"bits must be 2, 4 or 8, got {bits}")
    if bits == 8:
        return packed
    per = 8 // bits
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    fields = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return fields.reshape(*packed.shape[:-1], packed.shape[-1] * per)


def dequantize_nbits(
    b: np.ndarray,
    scales: np.ndarray,
    zero_points: np.ndarray | None,
    *,
    n: int,
    k: int,
    bits: int,
    block_size: int,
) -> np.ndarray:
    """Packed B (N, k_blocks, blob) -> float32 W (N, K) = (q - zero_point) * scale."""
    k_blocks = -(-k // block_size)
    q = unpack_bits(np.ascontiguousarray(b).reshape(n, -1), bits).astype(np.float32)
    q = q.reshape(n, k_blocks, block_size)
    s = np.asarray(scales, np.float32).reshape(n, k_blocks, 1)
    if zero_points is None:
        zp: np.ndarray | float = np.float32(1 << (bits - 1))
    elif zero_points.dtype == np.uint8:
        zp = unpack_bits(zero_points.reshape(n, -1), bits)[:, :k_blocks].astype(np.float32)
        zp = zp.reshape(n, k_blocks, 1)
    else:  # unpacked, in A's float type
        zp = zero_points.astype(np.float32).reshape(n, k_blocks, 1)
    return ((q - zp) * s).reshape(n, k_blocks * block_size)[:, :k]


def quantize_a_int8(a: np.ndarray, block_size: int) -> np.ndarray:
    """accuracy_level 4: A's rows quantized per block of K to int8 with scale amax / 127
    (MLAS QuantizeARow_CompInt8), returned dequantized so a float product matches the
    integer one onnxruntime computes up to float summation order."""
    k = a.shape[-1]
    pad = -k % block_size
    ap = np.pad(a.astype(np.float32), [(0, 0)] * (a.ndim - 1) + [(0, pad)])
    blocks = ap.reshape(*a.shape[:-1], -1, block_size)
    scale = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)
    inv = np.divide(np.float32(1), scale, out=np.zeros_like(scale), where=scale != 0)
    q = np.clip(np.rint(blocks * inv), -128, 127)
    return (q * scale).reshape(ap.shape)[..., :k]


def prepare_nbits(
    consts: tuple[np.ndarray | None, ...], attrs: dict[str, Any]
) -> nbits_lanes.NbitsState | None:
    """MatMulNBits' prepare hook: the lanes weight when B, scales (and zero points, when
    given) are constants the lanes path computes; else None (built per call)."""
    b, scales = consts[1], consts[2]
    zp = consts[3] if len(consts) > 3 else None
    if b is None or scales is None or b.size == 0:
        return None
    k, n = attrs["K"], attrs["N"]
    level, bits = attrs.get("accuracy_level", 0), attrs.get("bits", 4)
    if not nbits_lanes.supported(b, zp, bits, attrs["block_size"], level, k):
        return None
    return nbits_lanes.prepare(b, scales, zp, n, k, attrs["block_size"])


@op("MatMulNBits", since=1, domain=MS_DOMAIN, prepare=prepare_nbits)
def matmul_nbits(
    a: np.ndarray,
    b: np.ndarray,
    scales: np.ndarray,
    zero_points: np.ndarray | None = None,
    g_idx: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    K: int,
    N: int,
    accuracy_level: int = 0,
    bits: int = 4,
    block_size: int,
    weight_prepacked: int = 0,
    prepared: nbits_lanes.NbitsState | None = None,
) -> np.ndarray:
    """float A (..., K) @ dequantized B^T (K, N) + bias -> (..., N) in A's type."""
    if weight_prepacked:
        raise ValueError("MatMulNBits: weight_prepacked layouts are CUDA-only")
    if g_idx is not None:
        raise ValueError("MatMulNBits: g_idx (deprecated act-order input) is not supported")
    if a.shape[-1] != K:
        raise ValueError(f"MatMulNBits: A's last dimension {a.shape[-1]} != K {K}")
    out_shape = (*a.shape[:-1], N)
    if b.size == 0:  # an omitted projection: zeros, or the bias
        y = np.zeros(out_shape, np.float32)
    elif nbits_lanes.supported(b, zero_points, bits, block_size, accuracy_level, K):
        y = nbits_lanes.matmul_lanes(
            a, b, scales, zero_points, N, K, prepared, block_size, accuracy_level
        )
    else:
        w = dequantize_nbits(b, scales, zero_points, n=N, k=K, bits=bits, block_size=block_size)
        af = a.astype(np.float32)
        # onnxruntime's int8 path (level 4) takes packed or default zero points only;
        # with float zero points it computes in float32 as level 0 does.
        if accuracy_level == 4 and (zero_points is None or zero_points.dtype == np.uint8):
            af = quantize_a_int8(af, block_size)
        y = np.matmul(af, w.T)
    if bias is not None:
        y = y + bias.astype(np.float32)
    return y.astype(a.dtype, copy=False)


def _codes(x: np.ndarray, bits: int) -> np.ndarray:
    """int32 codes of int4/uint4 data, or of uint8 data bit-packed along the last axis."""
    if x.dtype in _SMALL:
        return x.astype(np.int32)
    return unpack_bits(x, bits).astype(np.int32)


@op("GatherBlockQuantized", since=1, domain=MS_DOMAIN)
def gather_block_quantized(
    data: np.ndarray,
    indices: np.ndarray,
    scales: np.ndarray,
    zero_points: np.ndarray | None = None,
    *,
    bits: int = 4,
    block_size: int = 128,
    gather_axis: int = 0,
    quantize_axis: int = 1,
) -> np.ndarray:
    """Gather(data, indices, gather_axis), dequantized per block along quantize_axis,
    in scales' type; an out-of-range index gives a zero slice (unlike Gather)."""
    q = _codes(data, bits)
    ga = norm_axis(gather_axis, q.ndim, "GatherBlockQuantized")
    qa = norm_axis(quantize_axis, q.ndim, "GatherBlockQuantized")
    size = q.shape[ga]
    idx = np.asarray(indices).astype(np.int64)
    valid = (idx >= -size) & (idx < size)
    idx = np.where(valid, idx % size if size else 0, 0)
    if zero_points is None:
        zp = np.zeros(scales.shape, np.int32) if data.dtype in _SMALL else 1 << (bits - 1)
    else:
        zp = _codes(zero_points, bits)
        zp = zp[tuple(slice(0, d) for d in scales.shape)]
    zp = np.broadcast_to(zp, scales.shape)
    s = scales.astype(np.float32)
    rows = np.take(q, idx, axis=ga)
    if ga == qa:
        s, zp = np.take(s, idx // block_size, axis=ga), np.take(zp, idx // block_size, axis=ga)
    else:
        s, zp = np.take(s, idx, axis=ga), np.take(zp, idx, axis=ga)
        # the quantize axis index moved if it follows the gather axis
        out_qa = qa + idx.ndim - 1 if qa > ga else qa
        n = rows.shape[out_qa]
        s = np.repeat(s, block_size, axis=out_qa).take(np.arange(n), axis=out_qa)
        zp = np.repeat(zp, block_size, axis=out_qa).take(np.arange(n), axis=out_qa)
    y = (rows - zp).astype(np.float32) * s
    mask = valid.reshape(valid.shape + (1,) * (q.ndim - 1 - ga))
    mask = mask.reshape((1,) * ga + mask.shape)
    return np.where(mask, y, 0).astype(scales.dtype)
