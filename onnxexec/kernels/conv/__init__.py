"""Convolution and pooling (NCHW float32): every path of Conv / FusedConv.

Entry points: `conv2d.conv2d` (chooses among the paths below by the `use_*` rules:
`conv_direct.use_direct`, `conv_rows.use_rows`, `conv_taps.use_taps`,
`pointwise_small.use_small`, depthwise), `depthwise.depthwise_conv2d`,
`conv_taps.to_ohwi` / `ohwi` (weight layout), `pool2d` (max / average pooling).
`*_job.py`, `*_planes.py`, `dw_asm.py`, `pointwise_t.py` are the native pool's span
kernels and their inline-asm helpers (x86 AVX2 / AVX-512, gated by kernels/isa.py).

No numba import here.
"""
