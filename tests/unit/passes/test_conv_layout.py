"""passes.conv_layout: direct-, tap- and im2row-path FusedConv weights re-stored OHWI (same
name, shape and values), others untouched; optimized and unoptimized graphs give the
same outputs."""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.conv import direct_job
from onnxexec.kernels.conv.conv_taps import ohwi
from onnxexec.passes.conv_layout import conv_layout
from onnxexec.passes.fuse_activation import fuse_activation
from tests.unit.passes._graphs import assert_same_outputs, graph, node, rand


def _convs(wshapes, x_shape, pads=(1, 1, 1, 1), extra=None):
    nodes, inits, cur = [], {}, "x"
    for i, ws in enumerate(wshapes):
        inits[f"w{i}"] = rand(*ws, seed=i + 1, scale=0.2)
        nodes.append(node("Conv", [cur, f"w{i}"], [f"y{i}"], pads=list(pads)))
        nodes.append(node("Relu", [f"y{i}"], [f"r{i}"]))
        cur = f"r{i}"
    nodes += extra or []
    return graph(nodes, [("x", x_shape)], [cur] if not extra else [cur, "side"], inits)


def test_wide_3x3_weights_restored_ohwi() -> None:
    g = fuse_activation(_convs([(24, 16, 3, 3), (32, 24, 3, 3)], [1, 16, 20, 20]))
    out = conv_layout(g)
    assert out is not g
    for name in ("w0", "w1"):
        w = out.initializers[name]
        assert ohwi(w) and w.shape == g.initializers[name].shape
        assert np.array_equal(w, g.initializers[name])
    assert_same_outputs(g, out, {"x": rand(1, 16, 20, 20, seed=9)}, rtol=1e-4, atol=1e-4)


def test_deep_narrow_3x3_weights_restored_ohwi() -> None:
    """Fewer output pixels than channels: the im2row path (conv_rows.use_rows)."""
    g = fuse_activation(_convs([(64, 16, 3, 3), (80, 64, 3, 3)], [1, 16, 7, 7]))
    out = conv_layout(g)
    for name in ("w0", "w1"):
        assert ohwi(out.initializers[name])
        assert np.array_equal(out.initializers[name], g.initializers[name])
    assert_same_outputs(g, out, {"x": rand(1, 16, 7, 7, seed=9)}, rtol=1e-4, atol=1e-4)


def test_pointwise_convs_untouched() -> None:
    """1x1 convs read W (M, C) as it is stored (conv_gemm.pointwise)."""
    g = fuse_activation(_convs([(24, 16, 1, 1)], [1, 16, 20, 20], (0, 0, 0, 0)))
    assert conv_layout(g) is g


def test_direct_path_weights_restored_only_where_it_runs() -> None:
    """Too few input channels or too narrow an output for the tap and im2row paths:
    the direct kernel (AVX-512 hosts) takes them, so their weights are re-stored there
    and left alone elsewhere."""
    for ws, xs in [((24, 8, 3, 3), [1, 8, 20, 20]), ((24, 16, 3, 3), [1, 16, 7, 7])]:
        g = fuse_activation(_convs([ws], xs))
        out = conv_layout(g)
        if not direct_job.AVAILABLE:
            assert out is g
            continue
        assert ohwi(out.initializers["w0"])
        assert_same_outputs(g, out, {"x": rand(*xs, seed=9)}, rtol=1e-4, atol=1e-4)


def test_weight_shared_with_another_reader_untouched() -> None:
    side = [node("Shape", ["w0"], ["side"])]
    g = fuse_activation(_convs([(24, 16, 3, 3)], [1, 16, 20, 20], extra=side))
    assert conv_layout(g) is g


def test_plain_conv_untouched() -> None:
    """Level 1 graphs keep ONNX Conv: only the fused op's kernel reads OHWI."""
    g = _convs([(24, 16, 3, 3)], [1, 16, 20, 20])
    assert conv_layout(g) is g
