"""Random GGUF blocks for kernel tests and a bit-exact comparison that names the worst block.

gguf-py (`gguf.quants`) is the independent reference: it dequantizes every type with
plain numpy. Random bytes are valid blocks for every type here (all bit patterns
decode), and `extreme_blocks` pins the half-precision scale fields to the edge cases
(0, -0, subnormals, 65504, inf, NaN).
"""

from __future__ import annotations

import gguf
import numpy as np

from onnxexec.kernels.quant import qtypes as q

# byte offsets of the half-precision scale fields inside one block (ggml-common.h)
SCALE_FIELDS: dict[int, tuple[int, ...]] = {
    q.Q4_0: (0,),
    q.Q4_1: (0, 2),
    q.Q5_0: (0,),
    q.Q5_1: (0, 2),
    q.Q8_0: (0,),
    q.IQ4_NL: (0,),
    q.Q2_K: (80, 82),
    q.Q3_K: (108,),
    q.Q4_K: (0, 2),
    q.Q5_K: (0, 2),
    q.Q6_K: (208,),
    q.IQ4_XS: (0,),
}
EXTREME_HALVES = (
    0x0000,
    0x8000,
    0x0001,
    0x03FF,
    0x0400,
    0x3C00,
    0x7BFF,
    0xFBFF,
    0x7C00,
    0xFC00,
    0x7E00,
    0x1400,
)
QUANT_TYPES = (
    q.Q4_0,
    q.Q4_1,
    q.Q5_0,
    q.Q5_1,
    q.Q8_0,
    q.Q2_K,
    q.Q3_K,
    q.Q4_K,
    q.Q5_K,
    q.Q6_K,
    q.IQ4_NL,
    q.IQ4_XS,
)
ALL_TYPES = (q.F32, q.F16, q.BF16, *QUANT_TYPES)


def geometry(t: int) -> tuple[int, int]:
    return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t)]


def name(t: int) -> str:
    return gguf.GGMLQuantizationType(t).name


def random_blocks(t: int, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """n_blocks random blocks of type t as raw bytes; scales kept in a sane range.

    Each half scale gets a random sign, exponent 2^-12..2^0 and mantissa, so values are
    finite and the arithmetic is exercised across magnitudes (extreme_blocks covers the
    rest).
    """
    _, size = geometry(t)
    raw = rng.integers(0, 256, n_blocks * size, dtype=np.uint8).reshape(n_blocks, size)
    if t in (q.F32, q.F16, q.BF16):
        return raw.reshape(-1)
    for off in SCALE_FIELDS[t]:
        exp = rng.integers(3, 16, n_blocks)  # biased exponent: 2^-12 .. 2^0
        half = (rng.integers(0, 2, n_blocks) << 15) | (exp << 10) | rng.integers(0, 1024, n_blocks)
        raw[:, off : off + 2] = half.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1)


def extreme_blocks(t: int, rng: np.random.Generator) -> np.ndarray:
    """One block per edge-case half value in every scale field of type t."""
    _, size = geometry(t)
    n = len(EXTREME_HALVES)
    raw = rng.integers(0, 256, n * size, dtype=np.uint8).reshape(n, size)
    halves = np.array(EXTREME_HALVES, dtype="<u2").view(np.uint8).reshape(n, 2)
    for k, off in enumerate(SCALE_FIELDS.get(t, ())):
        raw[:, off : off + 2] = np.roll(halves, k, axis=0)
    return raw.reshape(-1)


def reference_dequant(raw: np.ndarray, t: int) -> np.ndarray:
    """gguf-py's dequantization of a flat byte buffer -> flat float32."""
    qt = gguf.GGMLQuantizationType(t)
    if t == q.F32:
        return raw.view(np.float32).copy()
    if t == q.F16:
        return raw.view(np.float16).astype(np.float32)
    _, size = geometry(t)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 in the extreme blocks
        return gguf.quants.dequantize(raw.reshape(-1, size), qt).reshape(-1).astype(np.float32)


def mismatch_report(ours: np.ndarray, ref: np.ndarray, raw: np.ndarray, t: int) -> str | None:
    """None when ours == ref bit for bit (any NaN equals any NaN); else the worst block."""
    ours = np.ascontiguousarray(ours, dtype=np.float32).reshape(-1)
    ref = np.ascontiguousarray(ref, dtype=np.float32).reshape(-1)
    both_nan = np.isnan(ours) & np.isnan(ref)
    bad = (ours.view(np.uint32) != ref.view(np.uint32)) & ~both_nan
    if not bad.any():
        return None
    block, size = geometry(t)
    per_block = bad.reshape(-1, block).sum(axis=1)
    worst = int(per_block.argmax())
    idx = np.flatnonzero(bad.reshape(-1, block)[worst])[:6]
    vals = ", ".join(
        f"[{i}] ours={ours[worst * block + i]!r} ref={ref[worst * block + i]!r}" for i in idx
    )
    raw_hex = raw.reshape(-1)[worst * size : (worst + 1) * size].tobytes().hex()
    return (
        f"{name(t)}: {int(bad.sum())} of {bad.size} values differ in "
        f"{int((per_block > 0).sum())} blocks; worst block #{worst} "
        f"({int(per_block[worst])} values): {vals}\n  bytes: {raw_hex}"
    )
