"""com.microsoft QAttention vs onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._ms_node import ours_and_ort

RNG = np.random.default_rng(2300)
B, S, D, N = 2, 5, 16, 4


def _mask(kind, total):
    if kind == "lengths":
        return np.array([total, 3], np.int32)
    if kind == "end_start":
        return np.array([total, 4, 0, 1], np.int32)
    if kind == "2d":
        return (RNG.uniform(size=(B, total)) > 0.3).astype(np.int32)
    if kind == "3d":
        return (RNG.uniform(size=(B, S, total)) > 0.3).astype(np.int32)
    return None


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("mask", [None, "lengths", "end_start", "2d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_qattention(mask, unidirectional, per_column):
    x = RNG.integers(0, 256, (B, S, D)).astype(np.uint8)
    w = RNG.integers(-128, 128, (D, 3 * D)).astype(np.int8)
    bias = RNG.normal(size=3 * D).astype(np.float32)
    ws = RNG.uniform(0.001, 0.01, 3 * D if per_column else ()).astype(np.float32)
    ins = [x, w, bias, np.array(0.02, np.float32), ws, _mask(mask, S), np.array(128, np.uint8)]
    ins.append(np.zeros(3 * D if per_column else (), np.int8))
    (out, present), (want, want_present) = ours_and_ort(
        "QAttention", ins, n_outputs=2, num_heads=N, unidirectional=unidirectional
    )
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(present, want_present, rtol=1e-4, atol=1e-5)


def test_qattention_with_past_and_scale():
    p_len = 3
    x = RNG.integers(0, 256, (B, S, D)).astype(np.uint8)
    w = RNG.integers(-128, 128, (D, 3 * D)).astype(np.int8)
    bias = RNG.normal(size=3 * D).astype(np.float32)
    past = RNG.normal(size=(2, B, N, p_len, D // N)).astype(np.float32)
    ins = [x, w, bias, np.array(0.02, np.float32), np.array(0.004, np.float32)]
    ins += [_mask("2d", p_len + S), np.array(120, np.uint8), np.array(0, np.int8), past]
    (out, present), (want, want_present) = ours_and_ort(
        "QAttention", ins, n_outputs=2, num_heads=N, unidirectional=1, scale=0.3
    )
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(present, want_present, rtol=1e-4, atol=1e-5)
