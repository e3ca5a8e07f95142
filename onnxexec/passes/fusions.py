"""The fusion passes of ORT_ENABLE_EXTENDED and the layout passes of ORT_ENABLE_ALL,
in the order they run (earlier fusions must not eat a later one's pattern: GELU and
attention before MatMul+Add, which runs before activation fusion)."""

from __future__ import annotations

from collections.abc import Callable

from onnxexec.ir.graph import Graph
from onnxexec.passes.conv_layout import conv_layout
from onnxexec.passes.fold_batchnorm import fold_batchnorm
from onnxexec.passes.fold_pad import fold_pad
from onnxexec.passes.fuse_activation import fuse_activation
from onnxexec.passes.fuse_attention import fuse_attention
from onnxexec.passes.fuse_dynamic_quant import fuse_dynamic_quant
from onnxexec.passes.fuse_elementwise import fuse_elementwise
from onnxexec.passes.fuse_gelu import fuse_gelu
from onnxexec.passes.fuse_layernorm import fuse_layernorm
from onnxexec.passes.fuse_matmul import fuse_matmul
from onnxexec.passes.fuse_qdq import fuse_qdq
from onnxexec.passes.fuse_qkv import fuse_qkv
from onnxexec.passes.fuse_qlut import fuse_qlut
from onnxexec.passes.fuse_rope import fuse_rope
from onnxexec.passes.fuse_skip_norm import fuse_skip_norm
from onnxexec.passes.pack_weights import pack_weights
from onnxexec.passes.prepack import prepack

EXTENDED: list[Callable[[Graph], Graph]] = [
    fuse_qdq,  # first: fuse_matmul would take MatMul(DQ, DQ) as a float product
    fuse_qlut,  # after fuse_qdq: single ops with their QLinear form stay those
    fuse_dynamic_quant,
    fold_batchnorm,
    fold_pad,  # before fuse_activation: the Conv it widens becomes a FusedConv
    fuse_layernorm,
    fuse_gelu,
    fuse_rope,
    fuse_attention,
    fuse_matmul,
    fuse_activation,
    fuse_skip_norm,
    fuse_elementwise,
]
LAYOUT: list[Callable[[Graph], Graph]] = [
    fuse_qkv,
    pack_weights,
    prepack,
    conv_layout,
]  # conv_layout after prepack
