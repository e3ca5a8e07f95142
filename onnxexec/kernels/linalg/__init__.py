"""Dense float32 linear algebra: GEMM, fused epilogues, BLAS, packed SGEMM.

Entry points: `gemm.linear`, `gemm.linear_packed`, `gemm.batched` (y = act(x @ W + b),
split over the native pool); `sgemm_packed.pack` / `unpack` (the weight layout the
pack_weights pass produces); `blas` (numpy's OpenBLAS cblas_sgemm, callable without
the GIL, and the product span the native pool runs).

No numba import here: the modules use kernels.objload.
"""
