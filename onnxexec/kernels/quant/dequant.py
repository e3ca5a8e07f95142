"""`dequantize(raw, ggml_type, shape)`: raw GGUF tensor bytes -> float32, bit-exact.

Every supported type matches gguf-py's `gguf.quants.dequantize` bit for bit
(tests/unit/kernels/quant/test_dequant.py). Types are the plain ints of
onnxexec.kernels.quant.qtypes (GGMLType members are ints too, so either can be passed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.fp16 import dequant_f16
from onnxexec.kernels.quant.iquants import KVALUES_IQ4NL, dequant_iq4_nl, dequant_iq4_xs
from onnxexec.kernels.quant.kquants import (
    dequant_q2_k,
    dequant_q3_k,
    dequant_q4_k,
    dequant_q5_k,
    dequant_q6_k,
)
from onnxexec.kernels.quant.q4 import dequant_q4_0, dequant_q4_1
from onnxexec.kernels.quant.q5 import dequant_q5_0, dequant_q5_1
from onnxexec.kernels.quant.q8 import dequant_q8_0

# type id -> (values per block, bytes per block, kernel(raw, out))
_KERNELS: dict[int, tuple[int, int, Callable[[np.ndarray, np.ndarray], None]]] = {
    q.F32: (1, 4, lambda raw, out: out.view(np.uint8).__setitem__(slice(None), raw)),
    q.F16: (1, 2, lambda raw, out: dequant_f16(raw, out.view(np.uint32))),
    # bfloat16 is the top half of a float32 (ggml_compute_bf16_to_fp32 in ggml-impl.h)
    q.BF16: (
        1,
        2,
        lambda raw, out: np.left_shift(
            raw.view("<u2"), 16, out=out.view(np.uint32), dtype=np.uint32
        ),
    ),
    q.Q4_0: (q.QK, q.Q4_0_BYTES, dequant_q4_0),
    q.Q4_1: (q.QK, q.Q4_1_BYTES, dequant_q4_1),
    q.Q5_0: (q.QK, q.Q5_0_BYTES, dequant_q5_0),
    q.Q5_1: (q.QK, q.Q5_1_BYTES, dequant_q5_1),
    q.Q8_0: (q.QK, q.Q8_0_BYTES, dequant_q8_0),
    q.Q2_K: (q.QK_K, q.Q2_K_BYTES, dequant_q2_k),
    q.Q3_K: (q.QK_K, q.Q3_K_BYTES, dequant_q3_k),
    q.Q4_K: (q.QK_K, q.Q4_K_BYTES, dequant_q4_k),
    q.Q5_K: (q.QK_K, q.Q5_K_BYTES, dequant_q5_k),
    q.Q6_K: (q.QK_K, q.Q6_K_BYTES, dequant_q6_k),
    q.IQ4_NL: (q.QK, q.IQ4_NL_BYTES, lambda raw, out: dequant_iq4_nl(raw, out, KVALUES_IQ4NL)),
    q.IQ4_XS: (q.QK_K, q.IQ4_XS_BYTES, lambda raw, out: dequant_iq4_xs(raw, out, KVALUES_IQ4NL)),
}

SUPPORTED_TYPES: frozenset[int] = frozenset(_KERNELS)


def block_geometry(ggml_type: int) -> tuple[int, int]:
    """(values per block, bytes per block) of a type dequantize supports."""
    if int(ggml_type) not in _KERNELS:
        raise NotImplementedError(f"dequantization of {q.type_name(ggml_type)} is not supported")
    block, size, _ = _KERNELS[int(ggml_type)]
    return block, size


def dequantize_into(raw: np.ndarray, ggml_type: int, out: np.ndarray) -> np.ndarray:
    """Decode raw bytes into a C-contiguous float32 `out` (its size sets the value count)."""
    block, size, kernel = _KERNELS[int(ggml_type)] if int(ggml_type) in _KERNELS else (0, 0, None)
    if kernel is None:
        raise NotImplementedError(f"dequantization of {q.type_name(ggml_type)} is not supported")
    flat = out.reshape(-1)
    if out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError("out must be a C-contiguous float32 array")
    if flat.size % block:
        raise ValueError(
            f"{q.type_name(ggml_type)}: {flat.size} values is not a multiple of "
            f"the block size {block}"
        )
    src = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    need = flat.size // block * size
    if src.size != need:
        raise ValueError(
            f"{q.type_name(ggml_type)}: {flat.size} values need {need} bytes, got {src.size}"
        )
    kernel(src, flat)
    return out


def dequantize(raw: np.ndarray, ggml_type: int, shape: tuple[int, ...]) -> np.ndarray:
    """Raw bytes of one tensor -> float32 array of numpy-order `shape`.

    F32 tensors come back as a zero-copy view when the bytes are 4-byte aligned.
    Raises NotImplementedError for types without a kernel, ValueError on size mismatch.
    """
    shape = tuple(int(s) for s in shape)
    if int(ggml_type) == q.F32:
        src = np.asarray(raw).reshape(-1).view(np.uint8)
        n = int(np.prod(shape, dtype=np.int64))
        if src.size != 4 * n:
            raise ValueError(f"F32: shape {shape} needs {4 * n} bytes, got {src.size}")
        if src.ctypes.data % 4 == 0:
            return src.view(np.float32).reshape(shape)
    out = np.empty(shape, dtype=np.float32)
    return dequantize_into(raw, ggml_type, out)
