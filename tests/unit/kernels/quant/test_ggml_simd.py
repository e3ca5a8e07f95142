"""kernels/quant/ggml_simd.py: the AVX2 Q4_1 / Q8_0 kernels give ggml_dot.dot_blocks' bits.

dot_blocks is the readable rendering of ggml_vec_dot_q4_1_q8_1 / q8_0_q8_0, itself
checked against a numpy reference in test_ggml_dot.py; here every row count (groups
of ggml_simd.ROWS and the rest), several activation rows, extreme half scales (zero,
subnormal, inf, nan) and several weights in one call must match it exactly."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import ggml_simd
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act, quantize_act8
from onnxexec.kernels.quant.ggml_dot import (
    BLOCK_TYPES,
    SIMD_TYPES,
    dot_blocks,
    simd_dot,
    simd_dot_many,
)
from tests.unit.kernels._qblocks import extreme_blocks, random_blocks

pytestmark = pytest.mark.skipif(not ggml_simd.AVAILABLE, reason="host without AVX2/FMA/F16C")
TYPES = sorted(ggml_simd.KINDS)


def _want(raw: np.ndarray, t: int, n: int, x: np.ndarray) -> np.ndarray:
    xq, xst = quantize_act(x)
    kind, bsize = BLOCK_TYPES[t]
    out = np.empty((x.shape[0], n), np.float32)
    dot_blocks(raw, raw.size // n, kind, bsize, xq, xst, out)
    return out


def test_quantize_act8_equals_quantize_act():
    x = np.random.default_rng(0).standard_normal((3, 96)).astype(np.float32) * 5
    x[1, :32] = 0.0  # an all-zero block: d = 0, values 0
    xq, xst = quantize_act(x)
    x8, xst8 = quantize_act8(x)
    assert x8.dtype == np.int8
    np.testing.assert_array_equal(x8.astype(np.int16), xq)
    np.testing.assert_array_equal(xst8, xst)


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
@pytest.mark.parametrize(
    ("n", "k", "rows"),
    [
        (1, 32, 1),
        (7, 64, 1),
        (9, 96, 3),
        (70, 576, 2),
        (13, 64, 4),
        (6, 96, 9),
        (13, 128, 7),
        (13, 96, 6),
    ],
)
def test_matches_dot_blocks(t, n, k, rows):
    rng = np.random.default_rng(t * 100 + n + rows)
    raw = random_blocks(t, n * k // 32, rng)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    x8, xst = quantize_act8(x)
    got = np.empty((rows, n), np.float32)
    simd_dot(raw, raw.size // n, t, x8, xst, got)
    np.testing.assert_array_equal(got, _want(raw, t, n, x))


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
def test_extreme_scales(t):
    """Zero / subnormal / inf / nan halves convert and propagate as in dot_blocks."""
    rng = np.random.default_rng(5)
    raw = extreme_blocks(t, rng)
    n = raw.size // BLOCK_TYPES[t][1]  # one block per row
    x = rng.standard_normal((2, 32)).astype(np.float32)
    x8, xst = quantize_act8(x)
    got = np.empty((2, n), np.float32)
    simd_dot(raw, raw.size // n, t, x8, xst, got)
    np.testing.assert_array_equal(got, _want(raw, t, n, x))


def test_many_weights_one_call_equal_separate_products():
    rng = np.random.default_rng(11)
    k = 128
    shapes = [(q.Q4_1, 37), (q.Q8_0, 8), (q.Q4_1, 5)]
    ws = [random_blocks(t, n * k // 32, rng) for t, n in shapes]
    x = rng.standard_normal((3, k)).astype(np.float32)
    x8, xst = quantize_act8(x)
    got = np.empty((3, sum(n for _, n in shapes)), np.float32)
    simd_dot_many([(w, w.size // n, t) for w, (t, n) in zip(ws, shapes, strict=True)], x8, xst, got)
    want = np.concatenate([_want(w, t, n, x) for w, (t, n) in zip(ws, shapes, strict=True)], 1)
    np.testing.assert_array_equal(got, want)


def test_parallel_twin_equals_serial():
    rng = np.random.default_rng(3)
    n, k = 4099, 576  # large enough for lanes.pick's parallel kernel
    raw = random_blocks(q.Q4_1, n * k // 32, rng)
    x = rng.standard_normal((1, k)).astype(np.float32)
    x8, xst = quantize_act8(x)
    par, ser = ggml_simd.DOT_MANY
    a = np.empty((1, n), np.float32)
    b = np.empty((1, n), np.float32)
    par((raw,), (raw.size // n,), (ggml_simd.Q4_1_KIND,), (0,), x8, xst, a, 7)
    ser((raw,), (raw.size // n,), (ggml_simd.Q4_1_KIND,), (0,), x8, xst, b, 1)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, _want(raw, q.Q4_1, n, x))


def test_simd_types_are_raw_weights_in_qmatmul():
    """qmatmul keeps SIMD_TYPES as GGUF bytes and its int8 path gives dot_blocks' bits."""
    from onnxexec.kernels.quant.qmatmul import prepare_weight, qmatmul

    rng = np.random.default_rng(2)
    for t in SIMD_TYPES & set(ggml_simd.KINDS):  # K-quants: test_ggml_simd_k.py
        n, k = 13, 64
        raw = random_blocks(t, n * k // 32, rng)
        w = prepare_weight(raw, t, (n, k))
        assert w.layout == "raw"
        x = rng.standard_normal((2, k)).astype(np.float32)
        np.testing.assert_array_equal(qmatmul(x, w, mode="int8"), _want(raw, t, n, x))


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
def test_multi_token_calls_equal_one_row_calls(t, monkeypatch):
    """Prompts take ggml_simd.COLS activation rows per weight block load (and one row
    at a time for the rest); every output must keep the one-row kernel's bits."""
    from onnxexec.kernels.quant import ggml_dot

    rng = np.random.default_rng(t + 7)
    n, k, rows = 11, 128, 2 * ggml_simd.COLS + 3
    raw = random_blocks(t, n * k // 32, rng)
    x8, xst = quantize_act8(rng.standard_normal((rows, k)).astype(np.float32))
    got = np.empty((rows, n), np.float32)
    simd_dot(raw, raw.size // n, t, x8, xst, got)
    monkeypatch.setattr(ggml_dot, "MULTI", False)
    one = np.empty((rows, n), np.float32)
    simd_dot(raw, raw.size // n, t, x8, xst, one)
    np.testing.assert_array_equal(got, one)
