"""kernels/attn/mha.attention's GIL-free per-head path (sgemm on views, as exporters feed
them) against the float64 reference, on 1-3 threads."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.attn import mha


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("h, hkv, t, s, dh", [(4, 4, 7, 7, 8), (6, 2, 5, 9, 16), (3, 1, 1, 4, 4)])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
def test_native_heads_on_exporter_views(threads, h, hkv, t, s, dh, mask_kind) -> None:
    b = 2
    # Q: Transpose(Reshape(x)) view (B, H, T, Dh); K^T: Transpose(0, 2, 3, 1) view of
    # (B, S, Hkv, Dh); V: Transpose(0, 2, 1, 3) view of a wider fused QKV output
    q = _rand(b, t, h, dh).transpose(0, 2, 1, 3)
    kt = _rand(b, s, hkv, dh, seed=1).transpose(0, 2, 3, 1)
    v = _rand(b, s, hkv * dh + 5, seed=2)[:, :, : hkv * dh].reshape(b, s, hkv, dh)
    v = v.transpose(0, 2, 1, 3)
    mask = None
    if mask_kind == "causal":
        mask = np.triu(np.full((t, s), -np.inf, np.float32), k=1 + s - t)
    elif mask_kind == "padding":  # (B, 1, 1, S), one fully masked batch row
        mask = np.zeros((b, 1, 1, s), np.float32)
        mask[1] = -np.inf
    assert mha._blas_views(q, kt, v)
    for nan_to_zero in (False, True):
        got = mha.attention(q, kt, v, mask, 0.3, nan_to_zero)
        want = mha.attention_reference(q, kt, v, mask, 0.3, nan_to_zero)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_unsupported_views_fall_back() -> None:
    # every stride > 4 along both axes: the Python path copies, results unchanged
    q = _rand(1, 2, 4, 6)
    kt = _rand(1, 2, 12, 10)[:, :, ::2, ::2]
    v = _rand(1, 2, 5, 6)
    assert not mha._blas_views(q, kt, v)
    got = mha.attention(q, kt, v, None, 1.0, False)
    np.testing.assert_allclose(got, mha.attention_reference(q, kt, v, None, 1.0, False), rtol=1e-4)


@pytest.mark.parametrize("mask_shape", [(1, 3, 6, 5), (2, 3, 6, 5), (2, 1, 6, 5), (5,)])
def test_native_job_layouts(threads, mask_shape) -> None:
    # K^T stored (Dh, S) row-major, V read transposed (a (Dv, S) array's view), a
    # per-head mask or a 1-D one: the job's other stride flags and mask indexing
    b, h, hkv, t, s, dh = 2, 3, 3, 6, 5, 4
    q = _rand(b, h, t, dh)
    kt = _rand(b, hkv, dh, s, seed=1)
    v = _rand(b, hkv, dh + 1, s, seed=2)[:, :, :dh].transpose(0, 1, 3, 2)
    mask = _rand(*mask_shape, seed=3)
    assert mha._blas_views(q, kt, v)
    got = mha.attention(q, kt, v, mask, 0.5, False)
    want = mha.attention_reference(q, kt, v, mask, 0.5, False)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
