"""Route GGUF weights to the llama.cpp-order dot products (ggml_dot*.py).

- LANES_KERNELS: Q4_1 / Q5_0 / Q5_1 / Q8_0 keep the lanes layout (qlayout.py) and
  their int8 path (qmatmul.int8_kernels) runs qmv_exact's kernels, which compute
  ggml_dot.dot_blocks' arithmetic bit for bit (tests/unit/kernels/quant/test_ggml_dot.py);
  ggml_matmul also takes those types as GGUF bytes (EXACT_TYPES, via ggml_dot).
- RAW_TYPES: every type prepare_weight keeps as GGUF bytes ("raw" layout) for these
  kernels; qmatmul hands ROUTED_TYPES (RAW_TYPES and F32) to `ggml_matmul` when its
  mode asks for llama.cpp's numerics (mode "int8", or "auto" below BLAS_MIN_T rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.ggml_dot import BLOCK_TYPES, ggml_dot
from onnxexec.kernels.quant.ggml_dot_f16 import ggml_dot_float
from onnxexec.kernels.quant.ggml_dot_k import K_TYPES, ggml_dot_k
from onnxexec.kernels.quant.qmv_exact import EXACT_KERNELS

LANES_KERNELS: dict[int, tuple[Any, Any]] = dict(EXACT_KERNELS)
EXACT_TYPES: frozenset[int] = frozenset(BLOCK_TYPES)
RAW_TYPES: frozenset[int] = frozenset(K_TYPES) | {q.F16, q.BF16}
ROUTED_TYPES: frozenset[int] = RAW_TYPES | {q.F32}  # F32 keeps its "f32" layout


def ggml_matmul(x: np.ndarray, w: Any, out: np.ndarray) -> np.ndarray:
    """out (T, N) = x (T, K) f32 @ W^T as llama.cpp computes it; w a QWeight of a type
    in ROUTED_TYPES or EXACT_TYPES (GGUF bytes, layout "raw"; F32 layout "f32")."""
    t = w.ggml_type
    if t == q.F32:
        return ggml_dot_float(w.arrays["w"], t, x, out)
    raw, rb = w.arrays["raw"], w.arrays["row_bytes"]
    if "packed" in w.arrays and out.flags.c_contiguous:  # vnni_q4k's copy, the same bits
        from onnxexec.kernels.quant.ggml_dot import simd_dot_many
        from onnxexec.kernels.quant.vnni_q4k import PACKED_Q4_K

        ws = [(w.arrays["packed"], int(rb), PACKED_Q4_K)]
        return simd_dot_many(ws, None, None, out, np.ascontiguousarray(x))
    if t in EXACT_TYPES:
        xq, xst = quantize_act(x)
        return ggml_dot(raw, rb, t, xq, xst, out)
    if t in K_TYPES:
        return ggml_dot_k(raw, rb, t, x, out)
    n, k = w.shape
    return ggml_dot_float(raw.view(np.uint16).reshape(n, k), t, x, out)
