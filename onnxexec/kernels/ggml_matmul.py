"""Route GGUF weights that keep their bytes to the llama.cpp-order dot products.

- EXACT_TYPES (ggml_dot.py): Q4_1 / Q5_0 / Q5_1 / Q8_0 x quantize_act's Q8_0 / Q8_1
  activations; qmatmul_q may call ggml_dot directly with shared activations.
- RAW_TYPES: every type prepare_weight keeps as GGUF bytes ("raw" layout) for these
  kernels; qmatmul hands them to `ggml_matmul` when its mode asks for llama.cpp's
  numerics (mode "int8").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxexec.kernels.actquant import quantize_act
from onnxexec.kernels.ggml_dot import BLOCK_TYPES, ggml_dot
from onnxexec.kernels.ggml_dot_k import K_TYPES, ggml_dot_k

EXACT_TYPES: frozenset[int] = frozenset(BLOCK_TYPES)
RAW_TYPES: frozenset[int] = EXACT_TYPES | frozenset(K_TYPES)


def ggml_matmul(x: np.ndarray, w: Any, out: np.ndarray) -> np.ndarray:
    """out (T, N) = x (T, K) f32 @ W^T as llama.cpp computes it; w a QWeight of a type
    in RAW_TYPES with its GGUF bytes (layout "raw")."""
    t = w.ggml_type
    raw, rb = w.arrays["raw"], w.arrays["row_bytes"]
    if t in EXACT_TYPES:
        xq, xst = quantize_act(x)
        return ggml_dot(raw, rb, t, xq, xst, out)
    if t in K_TYPES:
        return ggml_dot_k(raw, rb, t, x, out)
    raise NotImplementedError(t)
