"""Signal processing: Hann/Hamming/Blackman windows, DFT, STFT, MelWeightMatrix.

Complex tensors are real arrays with a trailing axis of 2 (real, imaginary); a real
signal has a trailing axis of 1. FFTs run in complex128 and are cast back to the
input's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ops.common import norm_axis
from onnxexec.ops.registry import op


def _scalar_int(x: np.ndarray | None, name: str) -> int | None:
    if x is None:
        return None
    v = np.asarray(x).reshape(-1)
    if v.size != 1:
        raise ValueError(f"{name} must be a scalar, has {v.size} elements")
    return int(v[0])


def _window(
    size: np.ndarray, periodic: int, output_datatype: int, coeffs: tuple[float, ...]
) -> np.ndarray:
    """sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 (symmetric).

    A symmetric window of size 1 would divide by zero; it is [1.0], as in numpy and torch.
    """
    n = _scalar_int(size, "window size")
    if n is None or n < 0:
        raise ValueError(f"window size must be >= 0, got {n}")
    denom = n if periodic else n - 1
    if denom == 0:
        return np.ones(n, dtype=np_dtype(output_datatype))
    phase = 2 * np.pi * np.arange(n, dtype=np.float64) / denom
    w = np.zeros(n, dtype=np.float64)
    for k, a in enumerate(coeffs):
        w += (-1) ** k * a * np.cos(k * phase)
    return w.astype(np_dtype(output_datatype))


@op("HannWindow", since=17)
def hann_window(size: np.ndarray, *, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    """0.5 - 0.5 cos(2 pi n / N)."""
    return _window(size, periodic, output_datatype, (0.5, 0.5))


@op("HammingWindow", since=17)
def hamming_window(size: np.ndarray, *, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    """25/46 - 21/46 cos(2 pi n / N)."""
    return _window(size, periodic, output_datatype, (25 / 46, 21 / 46))


@op("BlackmanWindow", since=17)
def blackman_window(size: np.ndarray, *, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    """0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window(size, periodic, output_datatype, (0.42, 0.5, 0.08))


def _to_complex(x: np.ndarray, what: str) -> np.ndarray:
    """(..., 1|2) real pairs -> complex; float64 gives complex128, anything else complex64.

    numpy's FFT runs natively in single precision, like onnxruntime's float kernels.
    """
    ct = np.complex128 if x.dtype == np.float64 else np.complex64
    if x.dtype.kind == "V":  # bfloat16: numpy cannot cast it to complex directly
        x = x.astype(np.float32)
    if x.shape[-1:] == (1,):
        return x[..., 0].astype(ct)
    if x.shape[-1:] == (2,):
        z = np.empty(x.shape[:-1], dtype=ct)
        z.real, z.imag = x[..., 0], x[..., 1]
        return z
    raise ValueError(f"{what}: last axis must be 1 (real) or 2 (complex), got {x.shape[-1:]}")


def _from_complex(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def _dft(
    x: np.ndarray, dft_length: int | None, axis: int, inverse: int, onesided: int
) -> np.ndarray:
    if x.ndim < 2:
        raise ValueError(f"DFT: input rank {x.ndim} < 2")
    # The last axis holds (re, im): the signal axes are [0, rank - 2].
    ax = norm_axis(axis, x.ndim, "DFT")
    if ax == x.ndim - 1:
        raise ValueError("DFT: axis cannot be the last (complex) axis")
    sig = _to_complex(x, "DFT")
    if dft_length is None:
        dft_length = 2 * (x.shape[ax] - 1) if inverse and onesided else x.shape[ax]
    if dft_length < 1:
        raise ValueError(f"DFT: dft_length {dft_length} < 1")
    if inverse and onesided:
        # IRFFT: one-sided complex spectrum -> full real signal (Operators.md DFT-20).
        return np.fft.irfft(sig, n=dft_length, axis=ax)[..., None].astype(x.dtype)
    if inverse:
        return _from_complex(np.fft.ifft(sig, n=dft_length, axis=ax), x.dtype)
    out = np.fft.fft(sig, n=dft_length, axis=ax)
    if onesided:
        out = np.take(out, np.arange(dft_length // 2 + 1), axis=ax)
    return _from_complex(out, x.dtype)


@op("DFT", since=20)
def dft(
    input: np.ndarray,  # noqa: A002 - the spec's input name
    dft_length: np.ndarray | None = None,
    axis: np.ndarray | None = None,
    *,
    inverse: int = 0,
    onesided: int = 0,
) -> np.ndarray:
    """DFT (or inverse) along `axis` (default -2); zero-pads or truncates to dft_length."""
    ax = -2 if axis is None else _scalar_int(axis, "DFT axis")
    return _dft(input, _scalar_int(dft_length, "DFT dft_length"), ax, inverse, onesided)


@op("DFT", since=17)
def dft_v17(
    input: np.ndarray,  # noqa: A002
    dft_length: np.ndarray | None = None,
    *,
    axis: int = 1,
    inverse: int = 0,
    onesided: int = 0,
) -> np.ndarray:
    """Opsets 17-19: axis as an attribute, default 1."""
    return _dft(input, _scalar_int(dft_length, "DFT dft_length"), axis, inverse, onesided)


@op("STFT", since=17)
def stft(
    signal: np.ndarray,
    frame_step: np.ndarray,
    window: np.ndarray | None = None,
    frame_length: np.ndarray | None = None,
    *,
    onesided: int = 1,
) -> np.ndarray:
    """[B, L, 1|2] signal -> [B, frames, bins, 2]; frames = (L - frame_length) // step + 1.

    A real [B, L] signal is taken as [B, L, 1]: onnxruntime accepts it and exporters
    (torch.stft through the TorchScript exporter) emit it (README "Leniencies")."""
    if signal.ndim == 2:
        signal = signal[..., None]
    if signal.ndim != 3:
        raise ValueError(f"STFT: signal must be [batch, length, 1|2], got {list(signal.shape)}")
    step = _scalar_int(frame_step, "STFT frame_step")
    length = _scalar_int(frame_length, "STFT frame_length")
    if length is None:
        length = signal.shape[1] if window is None else window.shape[0]
    if window is not None and window.shape[0] != length:
        raise ValueError(f"STFT: window length {window.shape[0]} != frame_length {length}")
    if step is None or step < 1 or length < 1 or length > signal.shape[1]:
        raise ValueError(f"STFT: bad frame_step {step} / frame_length {length}")
    sig = _to_complex(signal, "STFT")  # (B, L)
    n_frames = (signal.shape[1] - length) // step + 1
    starts = np.arange(n_frames) * step
    frames = sig[:, starts[:, None] + np.arange(length)]  # (B, frames, length)
    if window is not None:
        frames = frames * window.astype(frames.real.dtype)
    spec = np.fft.fft(frames, axis=-1)
    if onesided:
        spec = spec[..., : length // 2 + 1]
    return _from_complex(spec, signal.dtype)


@op("MelWeightMatrix", since=17)
def mel_weight_matrix(
    num_mel_bins: np.ndarray,
    dft_length: np.ndarray,
    sample_rate: np.ndarray,
    lower_edge_hertz: np.ndarray,
    upper_edge_hertz: np.ndarray,
    *,
    output_datatype: int = 1,
) -> np.ndarray:
    """[dft_length // 2 + 1, num_mel_bins] float triangular filters with peak 1.

    The mel scale is mel(f) = 2595 log10(1 + f/700).
    Band edges are num_mel_bins + 2 points evenly spaced in mel between the two edges,
    mapped back to hertz and then to the DFT bin floor((dft_length + 1) * f / sample_rate).
    """
    n_mel = _scalar_int(num_mel_bins, "num_mel_bins")
    n_dft = _scalar_int(dft_length, "dft_length")
    rate = _scalar_int(sample_rate, "sample_rate")
    lo = float(np.asarray(lower_edge_hertz).reshape(-1)[0])
    hi = float(np.asarray(upper_edge_hertz).reshape(-1)[0])
    n_bins = n_dft // 2 + 1

    def mel(f: float) -> float:
        return 2595 * math.log1p(f / 700) / math.log(10)

    lo_mel, hi_mel = mel(lo), mel(hi)
    # The onnx reference (which generated the conformance data) divides the mel span
    # by the number of edge points, num_mel_bins + 2.
    step = (hi_mel - lo_mel) / (n_mel + 2)
    pts = np.arange(n_mel + 2) * step + lo_mel
    hz = 700 * np.expm1(pts / 2595 * math.log(10))
    bins = np.floor_divide((n_dft + 1) * hz, rate).astype(np.int64)
    out = np.zeros((n_bins, n_mel), dtype=np.float64)
    for i in range(n_mel):
        left, center, right = int(bins[i]), int(bins[i + 1]), int(bins[i + 2])
        if center == left:
            out[center, i] = 1.0
        else:
            j = np.arange(left, center + 1)
            out[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            out[j, i] = (right - j) / (right - center)
    return out.astype(np_dtype(output_datatype))
