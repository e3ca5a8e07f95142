"""Attention and the LLM decode step's fused kernels.

Entry points: `mha.attention` (MultiHeadAttention, native pool), `attention.kv_attention`
and `ggml_n_kv` (GGUF models' attention, llama.cpp-exact), `rope.rope`,
`llm_fused` (norm + quantize + dot fusions), `llm_decode.attn_one` / `ffn_one` /
`norm_dot_one` / `ready` and `llm_decode_mt` (one decode token as a few kernels),
`attend_one.PAR_MIN_ATTN`. `ggml_simd_attn` holds their SIMD intrinsics.

No numba import here.
"""
