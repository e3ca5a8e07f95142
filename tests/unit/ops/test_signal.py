"""Windows, DFT, STFT, MelWeightMatrix (ops/signal.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from tests.unit.ops._node import run_node

RNG = np.random.default_rng(2)


def naive_dft(x: np.ndarray, n: int, inverse: bool = False) -> np.ndarray:
    """sum_t x[t] exp(-+2 pi i k t / n) over the last axis, written out (1/n when inverse)."""
    length = x.shape[-1]
    xp = np.zeros((*x.shape[:-1], n), complex)
    m = min(n, length)
    xp[..., :m] = x[..., :m]
    sign = 1 if inverse else -1
    k = np.arange(n)
    w = np.exp(sign * 2j * np.pi * np.outer(k, k) / n)
    out = xp @ w.T
    return out / n if inverse else out


@pytest.mark.parametrize(
    ("op", "coeffs"),
    [
        ("HannWindow", (0.5, 0.5)),
        ("HammingWindow", (25 / 46, 21 / 46)),
        ("BlackmanWindow", (0.42, 0.5, 0.08)),
    ],
)
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, coeffs, periodic):
    n = 10
    big_n = n if periodic else n - 1
    t = np.arange(n)
    ref = sum((-1) ** k * a * np.cos(2 * np.pi * k * t / big_n) for k, a in enumerate(coeffs))
    (w,) = run_node(op, [np.array(n, np.int64)], opset=17, periodic=periodic)
    assert w.dtype == np.float32
    np.testing.assert_allclose(w, ref, atol=1e-6)
    (w,) = run_node(op, [np.array(n, np.int32)], opset=17, output_datatype=TensorProto.DOUBLE)
    assert w.dtype == np.float64


def test_symmetric_window_of_one_is_one():
    (w,) = run_node("HannWindow", [np.array(1, np.int64)], opset=17, periodic=0)
    assert w.tolist() == [1.0]


def test_dft_v20_real_input_default_axis():
    x = RNG.standard_normal((2, 8, 1)).astype(np.float32)
    (y,) = run_node("DFT", [x], opset=20)
    ref = naive_dft(x[..., 0], 8)
    assert y.shape == (2, 8, 2) and y.dtype == np.float32
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], ref, atol=1e-4)


def test_dft_v20_axis_input_length_and_onesided():
    x = RNG.standard_normal((4, 6, 1)).astype(np.float32)
    (y,) = run_node("DFT", [x, np.array(10, np.int64), np.array(0, np.int64)], opset=20, onesided=1)
    ref = naive_dft(x[..., 0].T, 10).T[: 10 // 2 + 1]  # zero-padded to 10 along axis 0
    assert y.shape == (6, 6, 2)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], ref, atol=1e-4)


def test_dft_v17_axis_attribute_and_inverse_round_trip():
    z = RNG.standard_normal((3, 5, 2)).astype(np.float32)
    (y,) = run_node("DFT", [z], opset=17, axis=1)
    ref = naive_dft(z[..., 0] + 1j * z[..., 1], 5)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], ref, atol=1e-4)
    (back,) = run_node("DFT", [y], opset=17, axis=1, inverse=1)
    np.testing.assert_allclose(back, z, atol=1e-5)


def test_dft_irfft():
    x = RNG.standard_normal((1, 8, 1))
    (spec,) = run_node("DFT", [x], opset=20, onesided=1)
    (back,) = run_node("DFT", [spec], opset=20, onesided=1, inverse=1)
    assert back.shape == (1, 8, 1) and back.dtype == np.float64
    np.testing.assert_allclose(back, x, atol=1e-12)


def test_stft_with_window():
    sig = RNG.standard_normal((1, 20, 1)).astype(np.float32)
    window = np.hanning(8).astype(np.float32)
    (y,) = run_node("STFT", [sig, np.array(4, np.int64), window], opset=17)
    frames = (20 - 8) // 4 + 1
    assert y.shape == (1, frames, 8 // 2 + 1, 2)
    for f in range(frames):
        ref = naive_dft(sig[0, f * 4 : f * 4 + 8, 0] * window, 8)[:5]
        np.testing.assert_allclose(y[0, f, :, 0] + 1j * y[0, f, :, 1], ref, atol=1e-4)


def test_stft_frame_length_without_window_two_sided():
    sig = RNG.standard_normal((2, 12, 2)).astype(np.float32)
    (y,) = run_node(
        "STFT", [sig, np.array(6, np.int64), None, np.array(6, np.int64)], opset=17, onesided=0
    )
    assert y.shape == (2, 2, 6, 2)
    z = sig[..., 0] + 1j * sig[..., 1]
    np.testing.assert_allclose(
        y[1, 1, :, 0] + 1j * y[1, 1, :, 1], naive_dft(z[1, 6:12], 6), atol=1e-4
    )


def test_mel_weight_matrix_shape_and_triangles():
    args = [np.array(v, np.int64) for v in (8, 64, 8000)] + [
        np.array(0.0, np.float32),
        np.array(4000.0, np.float32),
    ]
    (m,) = run_node("MelWeightMatrix", args, opset=17)
    assert m.shape == (33, 8) and m.dtype == np.float32
    # Each filter is a triangle peaking at exactly 1 and zero elsewhere.
    assert np.allclose(m.max(axis=0), 1.0)
    assert (m >= 0).all() and (m <= 1).all()
    # Filter 0 rises from its left edge: mel edges per Operators.md MelWeightMatrix.
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    edges_mel = mel(0.0) + np.arange(10) * (mel(4000.0) - mel(0.0)) / 10
    edges_bin = np.floor(65 * (700 * (10 ** (edges_mel / 2595) - 1)) / 8000).astype(int)
    left, center = edges_bin[0], edges_bin[1]
    assert m[center, 0] == 1.0 and m[left, 0] == 0.0
