"""Inputs onnxruntime accepts beyond the onnx spec, which exporters rely on, checked
against onnxruntime: STFT with a rank-2 real signal [batch, length]."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._ort_node import both


@pytest.mark.parametrize("onesided", [1, 0])
@pytest.mark.parametrize("window", [True, False])
def test_stft_rank2_signal(onesided, window):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    inputs = [x, np.array(8, np.int64)]
    inputs += (
        [np.hanning(16).astype(np.float32), None] if window else [None, np.array(16, np.int64)]
    )
    got, want = both("STFT", inputs, domain="", opset=17, onesided=onesided)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
