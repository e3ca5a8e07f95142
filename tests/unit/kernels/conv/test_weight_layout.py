"""The conv weight's storage is planned data (kernels/conv/layout.py): FusedConv's
prepare hook records it once, and conv2d picks the OHWI paths from that value rather
than from the weight's strides. Results against a float64 numpy conv; which path ran
is seen through a spy on conv2d's tap-GEMM entry."""

from __future__ import annotations

import numpy as np
import pytest

import onnxexec.kernels.conv.conv2d as conv2d_module
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_taps import to_ohwi, use_taps
from onnxexec.kernels.conv.layout import WeightLayout, layout_of
from onnxexec.ops.fused_linear import prepare_conv
from tests.unit.kernels.conv.test_conv_taps import _reference

# 3x3, 16 input channels, 12-wide output: the tap-GEMM rule's shape (conv_taps.use_taps)
X_SHAPE, W_SHAPE, PADS = (1, 16, 12, 12), (8, 16, 3, 3), (1, 1, 1, 1)


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(X_SHAPE).astype(np.float32)
    w = rng.standard_normal(W_SHAPE).astype(np.float32)
    return x, w


def test_layout_of_reads_the_storage() -> None:
    _, w = _data()
    assert layout_of(w) is WeightLayout.OIHW
    assert layout_of(to_ohwi(w)) is WeightLayout.OHWI
    assert layout_of(to_ohwi(w).astype(np.float64)) is WeightLayout.OIHW  # float32 only
    assert layout_of(w[:, :, :1, :1]) is WeightLayout.OIHW  # a 1x1 slice: a strided view


def test_prepare_hook_records_the_layout() -> None:
    _, w = _data()
    assert prepare_conv((None, to_ohwi(w), None), {}).layout is WeightLayout.OHWI
    assert prepare_conv((None, w, None), {}).layout is WeightLayout.OIHW
    assert prepare_conv((None, None, None), {}).layout is None  # a computed weight


@pytest.fixture
def tap_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count conv2d's tap-GEMM runs; the direct and rows paths (tried first) are off."""
    calls: list[int] = []
    real = conv2d_module.conv_taps
    monkeypatch.setattr(conv2d_module, "use_direct", lambda *a: False)
    monkeypatch.setattr(conv2d_module, "use_rows", lambda *a: False)
    monkeypatch.setattr(
        conv2d_module, "conv_taps", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    return calls


@pytest.mark.parametrize("layout", [None, WeightLayout.OHWI, WeightLayout.OIHW])
def test_conv2d_follows_the_given_layout(tap_calls: list[int], layout) -> None:
    x, w = _data()
    if not use_taps(w.shape[1], X_SHAPE[3], 3, 3):
        pytest.skip("no BLAS sgemm here: conv2d has no tap-GEMM path to choose")
    ref, out_hw = _reference(x, w, None, (1, 1), PADS, (1, 1), 1)
    y = conv2d(x, to_ohwi(w), None, (1, 1), PADS, (1, 1), 1, out_hw, layout=layout)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # None: read from the weight (OHWI); a planned OIHW keeps to the im2col paths even
    # though this weight's strides would allow the taps
    assert len(tap_calls) == (0 if layout is WeightLayout.OIHW else 1)
