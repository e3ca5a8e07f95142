"""The tuning table: every shape or size threshold that picks a kernel path, a thread
count or a tile size, in one place (issue 27).

Plain integers, no numba: the modules that use a threshold import it under the name they
used before (`from onnxexec.kernels.tuning import CONV_TAPS_MIN_CG as _MIN_CG`), so a
numba kernel still freezes it as a compile-time global and a test can still monkeypatch
the user's module. This file is under kernels/, so the kernel store's source digest
(kernels.sources_digest) covers it: changing a value recompiles the kernels.

Each entry says what it decides and cites the measurement behind it. "RESULTS: <title>"
names a section of benchmarks/RESULTS.md where the model-level effect is recorded;
"kernels.md: <title>" a section of docs/kernels.md; the shapes quoted are those of the
original measurement (2-vCPU AVX-512 VM, 2 threads, unless said). Values were moved
here unchanged; none was re-measured for the move.
"""

from __future__ import annotations

from typing import Final

# ---------------------------------------------------------------------------------------
# Thread-pool hand-off: below these amounts of work one thread is faster than waking
# a second (a wake-up costs ~10-40 us on this VM, far more on a busy one).
# RESULTS: "2026-12-07: ONNX models against onnxruntime" (the network rows).
# ---------------------------------------------------------------------------------------
SPANS_PER_THREAD: Final = 2  # native pool: finer spans balance uneven thread progress
GEMM_PARALLEL_MACS: Final = 1 << 18  # linalg/gemm: multiply-adds, numba GEMM
GEMM_NATIVE_PARALLEL_MACS: Final = 1 << 20  # linalg/gemm `linear`: a few-us hand-off
CONV_GEMM_PARALLEL_MACS: Final = 1 << 18  # conv/conv_gemm
CONV_DIRECT_PARALLEL_MACS: Final = 1 << 19  # conv/conv_direct
CONV_TAPS_PARALLEL_MACS: Final = 1 << 19  # conv/conv_taps
POINTWISE_SMALL_PARALLEL_MACS: Final = 1 << 19  # conv/pointwise_small
DEPTHWISE_SPAN_MACS: Final = 32768  # conv/depthwise: multiply-adds per woken span
POOL_SPAN_TAPS: Final = 1 << 16  # conv/pool2d: window taps per parallel span
GGML_PAR_MIN_WORK: Final = 1 << 16  # math/ggml_math: element operations
LANES_PAR_MIN_MACS: Final = 1 << 18  # math/lanes: int16-lane products
ATTN_PAR_MIN_WORK: Final = 1 << 18  # attn/attention: multiply-adds
# attn/attend_one: query width x cache cells from which one token's heads run in
# parallel (RESULTS: "2026-12-03: GGUF models against llama.cpp", decode tok/s)
ATTEND_ONE_PAR_MIN: Final = 1 << 17
# ml/trees: rows x trees; a tree walk costs tens of ns, a wake-up tens of us
# (RESULTS: "2026-12-07: ONNX models against onnxruntime", the scikit-learn rows)
TREES_PARALLEL_MIN_WORK: Final = 1 << 15

# ---------------------------------------------------------------------------------------
# Convolution paths (the use_* rules in kernels/conv). Measured on ResNet-50 and
# MobileNetV2 layer shapes against the other paths on 1 and 2 threads; RESULTS:
# "2026-12-07: ONNX models against onnxruntime" and its "Kernel changes measured for
# this table"; kernels.md: "Direct convolution", "1x1 convolutions with a 7x7 output".
# ---------------------------------------------------------------------------------------
# use_packed: 1x1 expansions (c <= m) take pointwise_packed from this many output
# pixels (fewer: OpenBLAS as fast or faster); on AVX-512 hosts every 1x1 layer from
# 28x28 = 784 pixels up (MobileNetV2 16->96 at 112x112 .. 32->192 at 28x28: 12-30%)
CONV_PACKED_MIN_COLS: Final = 512
CONV_PACKED_MIN_COLS_AVX512: Final = 784
# use_taps: tap GEMMs beat im2col from this many input channels per group (K = Cg
# products run slowly below) and this output width (junk columns cost more below)
CONV_TAPS_MIN_CG: Final = 16
CONV_TAPS_MIN_OW: Final = 10
# use_rows: fewer pixels than channels (ResNet-50's 14x14 and 7x7 stages 1.2-3x faster
# than tap GEMMs or im2col), with at least this many input channels per group
CONV_ROWS_MIN_CG: Final = 16
# use_direct on strided KxK convs: phase planes up to this many floats (256 KB) or this
# few input channels (the 7x7 / 3x3 stems); or up to 1 MB of planes with outputs of at
# least 14x14 = 196 pixels (ResNet-50's 256x28x28 stride-2 layer 1.87 -> 1.41 ms;
# 512x14x14 was 8% slower)
CONV_DIRECT_STRIDED_MAX_FLOATS: Final = 1 << 16
CONV_DIRECT_STRIDED_MAX_CG: Final = 4
CONV_DIRECT_STRIDED_MID_FLOATS: Final = 1 << 18
CONV_DIRECT_STRIDED_MID_OUT: Final = 196
CONV_DIRECT_SMALL_WEIGHT: Final = 1 << 18  # bytes: a weight every thread reads whole
# use_direct_pointwise: 1x1 convs with few input channels (a tile's c x 128 bytes of
# input stay in L1) and many pixels: c <= 256 from 56x56 = 3136 pixels, c <= 64 from
# 28x28 = 784 (0.5-0.9x the packed / BLAS paths' time there; slower with 256+ input
# channels or 7x7 / 14x14 outputs)
DIRECT_PW_MAX_C: Final = 256
DIRECT_PW_MIN_P: Final = 3136
DIRECT_PW_MAX_C_SMALL: Final = 64
DIRECT_PW_MIN_P_SMALL: Final = 784
# use_small: pointwise_small's pixel x channel tiles up to a 7x7 output (MobileNetV2
# 320->1280 193 -> 168 us; 14x14 was mixed and no faster in-model)
POINTWISE_SMALL_MAX_PIXELS: Final = 49
# conv2d's wide path from this output width (narrower: its junk columns cost more
# than im2col)
CONV_WIDE_MIN_OW: Final = 16

# ---------------------------------------------------------------------------------------
# Tile and block sizes: cache budgets of this machine's L1 (48 KB) / L2 (2 MB).
# ---------------------------------------------------------------------------------------
IM2COL_TILE_FLOATS: Final = 1 << 19  # conv/conv2d: floats per im2col tile (2 MiB)
CONV_TAPS_TILE_FLOATS: Final = 1 << 16  # conv/conv_taps: output tile, ~256 KiB
DIRECT_L2_FLOATS: Final = 1 << 17  # conv/direct_job: input window / ext block in L2
POINTWISE_PACKED_BLOCK_FLOATS: Final = 1 << 15  # conv/pointwise_packed: 128 KB, in L2
DEPTHWISE_BLOCK: Final = 1024  # conv/depthwise_planes: accumulator block stays in L1
GGML_SILU_BLOCK: Final = 2048  # math/ggml_math: elements per work item (L1 rows)
ATTN_PROMPT_ROWS: Final = 16  # attn/attention: query rows per prompt work item
# ops/conv.py: im2col rows built at once; bounds the temporary to ~256 MiB of float32
OPS_CONV_COLS_BUDGET: Final = 64 * 1024 * 1024

# ---------------------------------------------------------------------------------------
# GGUF quantized matmul (kernels/quant). These also fix the summation order, so
# llama.cpp parity (tests/parity) depends on them as much as speed does.
# RESULTS: "2026-12-03: GGUF models against llama.cpp".
# ---------------------------------------------------------------------------------------
QGEMM_MIN_T: Final = 8  # qgemm_exact: from this many activation rows, beats qmv_exact
# qmv_exact_k: rows from which Q4_K / Q6_K go to the BLAS gemm (2 threads, 3072 x 768:
# Q4_K lanes 17 ms vs BLAS 21 ms at 128 rows; Q6_K 13 vs 6 ms at 32 rows)
QGEMM_MIN_T_Q4K: Final = 256
QGEMM_MIN_T_Q6K: Final = 32
QMATMUL_BLAS_MIN_T: Final = 12  # qmatmul: dequantized panels + BLAS win from here
QMATMUL_PANEL_BYTES: Final = 1 << 19  # qmatmul: one dequantized panel, fits in L2
QMATMUL_RELAYOUT_ROWS: Final = 2048  # qmatmul: rows relayouted at once (temporaries)

# ---------------------------------------------------------------------------------------
# Op handlers and passes: numpy below, kernels above.
# RESULTS: "2026-12-07: per-node overhead and subgraphs" (small-op costs).
# ---------------------------------------------------------------------------------------
# ops/reduce.py: elements below which a reduction stays in numpy (and needs no numba)
REDUCE_FAST_MIN: Final = 1 << 14
# ops/fused_elementwise.py: outputs below this run as numpy ufuncs (numba setup ~25 us
# + ~5 us per input against ~1.5 us per instruction, on 2 loaded cores)
FUSED_ELEMENTWISE_SMALL: Final = 2048
# passes/pack_weights.py: K * N below which a MatMul weight stays unpacked (BLAS)
PACK_WEIGHTS_MIN_SIZE: Final = 1 << 16
