"""Dropout at every opset: inference is the identity; training with a seed draws
numpy's RandomState(seed).uniform and keeps elements >= ratio, scaled by 1/(1-ratio)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node

X = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize(
    "opset,attrs,mask_dtype",
    [
        (22, {}, np.bool_),
        (12, {"seed": 3}, np.bool_),
        (10, {"ratio": 0.3}, np.bool_),
        (7, {"ratio": 0.3}, np.float32),
        (6, {"is_test": 1}, np.float32),
        (1, {"is_test": 0, "ratio": 0.2}, np.float32),
    ],
)
def test_inference_is_identity_with_full_mask(opset, attrs, mask_dtype):
    y, mask = run_node("Dropout", [X], n_outputs=2, opset=opset, **attrs)
    np.testing.assert_array_equal(y, X)
    assert mask.dtype == mask_dtype and mask.shape == X.shape and np.all(mask == 1)


def test_training_with_seed_is_reproducible_and_scaled():
    ratio = np.array(0.75, np.float32)
    y, mask = run_node("Dropout", [X, ratio, np.array(True)], n_outputs=2, opset=13, seed=7)
    keep = np.random.RandomState(7).uniform(0.0, 1.0, X.shape) >= np.float32(0.75)
    np.testing.assert_array_equal(mask, keep)
    np.testing.assert_allclose(y, np.where(keep, X * 4.0, 0.0), rtol=1e-6)
    assert y.dtype == np.float32


def test_training_zero_ratio_and_training_off():
    y, mask = run_node(
        "Dropout", [X, np.array(0.0, np.float32), np.array(True)], n_outputs=2, opset=22
    )
    np.testing.assert_array_equal(y, X)
    assert mask.all()
    (y2,) = run_node("Dropout", [X, np.array(0.5, np.float32), np.array(False)], opset=22)
    np.testing.assert_array_equal(y2, X)
