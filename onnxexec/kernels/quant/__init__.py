"""GGUF quantized math: block layouts, dequantization, quantized matmul.

Entry points: `qmatmul.QWeight` / `prepare_weight` / `qmatmul` / `qembedding` (what
ops and llm call), `dequant.dequantize` / `SUPPORTED_TYPES`, `qtypes` (block sizes:
plain data, also read by loaders/ggml_types.py), `actquant.quantize_act`. The rest are
the per-type kernels: `q4` / `q5` / `q8` / `kquants` / `iquants` (dequant),
`ggml_dot*` / `ggml_simd*` (llama.cpp-exact dot products, SIMD intrinsics),
`qmv_*` / `qgemm_*` (exact matvec / GEMM), `qlayout` (relayouts), `fp16`.

No numba import here (importing qtypes imports no numba).
"""
