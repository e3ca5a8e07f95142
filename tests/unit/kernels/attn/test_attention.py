"""numba KV-cache attention vs a plain numpy reference written from the definition."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.attn.attention import kv_attention


def reference(q, kc, vc, pos, scale, window=0, softcap=0.0, f16=False):
    """Softcap (before the scale, as llama.cpp's build_attn_mha), softmax, then P @ V; with
    f16, q and the probabilities are rounded to half precision as ggml's F16 KV path."""
    if f16:
        q = q.astype(np.float16).astype(np.float32)
    T, HD = q.shape
    _, Hkv, Dh = kc.shape
    H = HD // Dh
    out = np.zeros((T, H, Dh), np.float64)
    qh = q.reshape(T, H, Dh).astype(np.float64)
    for t in range(T):
        p = pos + t
        for h in range(H):
            hk = h // (H // Hkv)
            js = [j for j in range(p + 1) if not (window and p - j >= window)]
            s = np.array([qh[t, h] @ kc[j, hk] for j in js])
            if softcap:
                s = softcap * np.tanh(s / softcap)
            s = s * scale
            w = np.exp(s - s.max())
            w /= w.sum()
            if f16:
                w = w.astype(np.float16).astype(np.float64)
            out[t, h] = sum(wi * vc[j, hk] for wi, j in zip(w, js, strict=True))
    return out.reshape(T, HD)


@pytest.mark.parametrize(
    ("T", "pos", "H", "Hkv", "window", "softcap"),
    [
        (1, 0, 2, 2, 0, 0.0),
        (5, 3, 4, 2, 0, 0.0),
        (1, 9, 6, 2, 0, 0.0),
        (6, 4, 4, 1, 3, 0.0),
        (3, 2, 4, 4, 0, 5.0),
    ],
)
def test_matches_reference(T, pos, H, Hkv, window, softcap):
    rng = np.random.default_rng(0)
    Dh, C = 8, 16
    q = rng.standard_normal((T, H * Dh)).astype(np.float32)
    kc = rng.standard_normal((C, Hkv, Dh)).astype(np.float32)
    vc = rng.standard_normal((C, Hkv, Dh)).astype(np.float32)
    got = kv_attention(q, kc, vc, pos, 0.35, window, softcap)
    np.testing.assert_allclose(
        got, reference(q, kc, vc, pos, 0.35, window, softcap), rtol=1e-5, atol=1e-5
    )


def test_rejects_overflowing_cache_and_bad_dtype():
    q = np.zeros((4, 8), np.float32)
    kc = np.zeros((4, 1, 8), np.float32)
    with pytest.raises(ValueError, match="exceed the KV cache"):
        kv_attention(q, kc, kc, 1, 1.0)
    with pytest.raises(ValueError, match="float32"):
        kv_attention(q.astype(np.float64), kc, kc, 0, 1.0)


def test_f16_path_rounds_q_and_probabilities():
    rng = np.random.default_rng(1)
    T, H, Hkv, Dh, C, pos = 4, 4, 2, 8, 12, 5
    q = rng.standard_normal((T, H * Dh)).astype(np.float32)
    kc = rng.standard_normal((C, Hkv, Dh)).astype(np.float16).astype(np.float32)
    vc = rng.standard_normal((C, Hkv, Dh)).astype(np.float16).astype(np.float32)
    got = kv_attention(q, kc, vc, pos, 0.35, ggml=True)
    ref16 = reference(q, kc, vc, pos, 0.35, f16=True)
    np.testing.assert_allclose(got, ref16, rtol=1e-5, atol=1e-5)
    assert np.abs(got - reference(q, kc, vc, pos, 0.35)).max() > 1e-5  # rounding is visible
