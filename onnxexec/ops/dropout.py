"""Dropout, every opset.

Inference returns the input unchanged with an all-true mask. Training (opset 12+
training_mode input) zeroes each element with probability `ratio` and scales the
survivors by 1 / (1 - ratio); with a `seed` the draw is numpy's legacy
RandomState(seed).uniform, so a seeded run repeats exactly (and matches the onnx
backend tests, which draw the same way).
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.registry import op


def _keep_mask(shape: tuple[int, ...], ratio: float, seed: int | None) -> np.ndarray:
    rng = np.random.RandomState(seed) if seed is not None else np.random.default_rng()
    return rng.uniform(0.0, 1.0, shape) >= ratio


@op("Dropout", since=12, wants=("outputs_used",))
def dropout(
    data: np.ndarray,
    ratio: np.ndarray | None = None,
    training_mode: np.ndarray | None = None,
    *,
    seed: int | None = None,
    outputs_used: tuple[bool, ...] = (True,),
) -> tuple[np.ndarray, np.ndarray | None]:
    """data (any shape) -> output like data, mask bool like data."""
    want_mask = len(outputs_used) > 1 and outputs_used[1]
    r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0])
    if not training or r == 0:
        return data, (np.ones(data.shape, dtype=bool) if want_mask else None)
    if not 0 <= r < 1:
        raise ValueError(f"Dropout: ratio must be in [0, 1), got {r}")
    keep = _keep_mask(data.shape, r, seed)
    scale = 1.0 / (1.0 - r)
    out = (keep * data * scale).astype(data.dtype, copy=False)
    return out, (keep if want_mask else None)


@op("Dropout", since=10)
def dropout_v10(data: np.ndarray, *, ratio: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Opsets 10-11: inference only; mask is bool."""
    return data, np.ones(data.shape, dtype=bool)


@op("Dropout", since=7)
def dropout_v7(data: np.ndarray, *, ratio: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Opsets 7-9: inference only; mask has the data's type."""
    return data, np.ones(data.shape, dtype=data.dtype)


@op("Dropout", since=6)
def dropout_v6(
    data: np.ndarray, *, is_test: int = 0, ratio: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """Opset 6: run as inference whatever is_test says (deployed models set it
    inconsistently; onnxruntime does the same)."""
    return dropout_v7(data, ratio=ratio)


@op("Dropout", since=1)
def dropout_v1(
    data: np.ndarray,
    *,
    consumed_inputs: tuple[int, ...] | None = None,
    is_test: int = 0,
    ratio: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    return dropout_v7(data, ratio=ratio)
