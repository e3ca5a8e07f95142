"""Row-wise and elementwise float math shared by the other kernel families.

Entry points: `activations.ACT` / `epilogue` / `act_row` (fused activation codes),
`ewise.run` with `ewise_ops.OPS` / `BINARY` (fused elementwise chains), `norms.layer_norm`,
`reduce.sum_rows`, `special.erf`, `vmath` (exp / erf / tanh rows), `ggml_math`
(llama.cpp-exact rms_norm, rope, silu, softcap), `lanes` (SIMD lane-count helpers).

No numba import here.
"""
