"""kernels/quant/ggml_simd_k.py: the AVX2 Q4_K / Q6_K kernels give llama.cpp's bits.

Two references: ggml_dot_k.dot_k (the readable numba rendering of the orders) and
the numpy reference of test_ggml_dot_k.py (_ggml_ref's decoding, the orders written
out per output value). Every order is exercised: the repacked Q4_K's gemv (T % 4
rows) and gemm (whole groups of 4 rows), Q6_K's vec_dot (< 8 rows) and tiled
(>= 8 rows); plus extreme half scales, row counts that are not a multiple of
ggml_simd.ROWS, several weights (and both activation formats) in one call, and the
parallel twin."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import ggml_simd, ggml_simd_k
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act8
from onnxexec.kernels.quant.ggml_dot import simd_dot, simd_dot_many, simd_ok
from onnxexec.kernels.quant.ggml_dot_k import (
    K_TYPES,
    REPACK_Q4_K,
    TILED_MIN_T,
    VALUE_BITS,
    VALUE_TAB,
    dot_k,
    quantize_q8_k,
    quantize_q8_k8,
    quantize_q8_k8_into,
)
from tests.unit.kernels._qblocks import extreme_blocks, geometry, random_blocks
from tests.unit.kernels.quant.test_ggml_dot_k import _reference
from tests.unit.kernels.quant.test_ggml_simd import _want as _want_blocks

pytestmark = pytest.mark.skipif(not ggml_simd.AVAILABLE, reason="host without AVX2/FMA/F16C")
TYPES = sorted(ggml_simd_k.KINDS)


def _dot_k(raw: np.ndarray, t: int, n: int, x: np.ndarray) -> np.ndarray:
    """ggml_dot_k.dot_k directly (ggml_dot_k() itself routes to the AVX2 kernels)."""
    kind, bsize = K_TYPES[t]
    rows4 = 0
    if kind == 4 and n % 8 == 0:
        kind, rows4 = REPACK_Q4_K, x.shape[0] - x.shape[0] % 4
    xq, xd, bs = quantize_q8_k(x, rows4)
    tiled = kind != REPACK_Q4_K and x.shape[0] >= TILED_MIN_T
    out = np.empty((x.shape[0], n), np.float32)
    dot_k(raw, raw.size // n, kind, bsize, VALUE_TAB, VALUE_BITS, xq, xd, bs, rows4, tiled, out)
    return out


def _simd(raw: np.ndarray, t: int, n: int, x: np.ndarray) -> np.ndarray:
    got = np.empty((x.shape[0], n), np.float32)
    return simd_dot(raw, raw.size // n, t, None, None, got, x)


def test_simd_ok():
    assert simd_ok(q.Q6_K, 7) and simd_ok(q.Q4_K, 16)
    assert not simd_ok(q.Q4_K, 12)  # llama.cpp does not repack it: another order


def test_quantize_q8_k8_equals_quantize_q8_k():
    x = np.random.default_rng(0).standard_normal((5, 512)).astype(np.float32) * 3
    x[2, 256:] = 0.0
    for rows4 in (0, 4):
        a = quantize_q8_k(x, rows4)
        b = quantize_q8_k8(x, rows4)
        assert b[0].dtype == np.int8
        np.testing.assert_array_equal(b[0].astype(np.int32), a[0])
        np.testing.assert_array_equal(b[1], a[1])
        np.testing.assert_array_equal(b[2], a[2])
        # into reused buffers holding garbage (the zero super-block too is written)
        c = (np.full(x.shape, 7, np.int8), np.full((5, 2), 9, np.float32))
        c += (np.full((5, 32), 3, np.int32),)
        quantize_q8_k8_into(x, rows4, *c)
        for want, got in zip(b, c, strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
@pytest.mark.parametrize(
    ("n", "k", "rows"),
    [
        (8, 256, 1),
        (16, 512, 3),
        (24, 768, 4),
        (13, 256, 5),
        (40, 768, 8),
        (8, 512, 9),
        (16, 256, 13),
    ],
)
def test_matches_references(t, n, k, rows):
    if not simd_ok(t, n):
        pytest.skip("not a SIMD weight")
    rng = np.random.default_rng(t * 100 + n + rows)
    raw = random_blocks(t, n * k // 256, rng)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    got = _simd(raw, t, n, x)
    np.testing.assert_array_equal(got, _dot_k(raw, t, n, x))
    np.testing.assert_array_equal(got, _reference(raw, t, n, k, x))


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
@pytest.mark.parametrize("rows", [1, 4, 8])
def test_extreme_scales(t, rows):
    """Zero / subnormal / inf / nan halves in d and dmin propagate as in dot_k."""
    rng = np.random.default_rng(5)
    raw = extreme_blocks(t, rng)
    nblk = raw.size // K_TYPES[t][1]
    n = nblk - nblk % 8  # one super-block per row, a repackable row count
    raw = raw[: n * K_TYPES[t][1]]
    x = rng.standard_normal((rows, 256)).astype(np.float32)
    np.testing.assert_array_equal(_simd(raw, t, n, x), _dot_k(raw, t, n, x))


@pytest.mark.parametrize("rows", [1, 2, 5, 8])
def test_mixed_weights_one_call_equal_separate_products(rows):
    """K-quants next to block types in one call (both activation formats, and for
    rows >= 4 the two Q8_K variants of Q4_K's gemm rows and Q6_K)."""
    rng = np.random.default_rng(11 + rows)
    k = 512
    shapes = [(q.Q4_K, 16), (q.Q6_K, 9), (q.Q5_0, 7), (q.Q8_0, 8), (q.Q4_K, 8)]
    ws = [random_blocks(t, n * k // geometry(t)[0], rng) for t, n in shapes]
    x = rng.standard_normal((rows, k)).astype(np.float32)
    x8, xst = quantize_act8(x)
    got = np.empty((rows, sum(n for _, n in shapes)), np.float32)
    simd_dot_many(
        [(w, w.size // n, t) for w, (t, n) in zip(ws, shapes, strict=True)], x8, xst, got, x
    )
    want = []
    for w, (t, n) in zip(ws, shapes, strict=True):
        want.append(_dot_k(w, t, n, x) if t in K_TYPES else _want_blocks(w, t, n, x))
    np.testing.assert_array_equal(got, np.concatenate(want, 1))


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
@pytest.mark.parametrize("n_chunks", [7, 16])
def test_parallel_twin_equals_serial(t, n_chunks):
    """One activation row (decode's WIDE-row calls, then 4-row and single-row tails
    where a chunk ends) on any chunking gives dot_k's bits."""
    rng = np.random.default_rng(3)
    n, k = 1032, 768
    raw = random_blocks(t, n * k // 256, rng)
    x = rng.standard_normal((1, k)).astype(np.float32)
    xk = quantize_q8_k8(x, 0)
    x8, xst = quantize_act8(x)
    par, ser = ggml_simd_k.DOT_MANY
    a = np.empty((1, n), np.float32)
    b = np.empty((1, n), np.float32)
    args = ((raw,), (raw.size // n,), (ggml_simd_k.KINDS[t],), (0,), x8, xst, *xk, 0)
    par(*args, a, n_chunks)
    ser(*args, b, 1)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, _dot_k(raw, t, n, x))


@pytest.mark.parametrize("t", TYPES, ids=q.type_name)
def test_raw_weights_in_qmatmul(t):
    """prepare_weight keeps SIMD K-quant weights as GGUF bytes; qmatmul's int8 path
    (through ggml_matmul / ggml_dot_k) gives dot_k's bits, decode and prompt sizes."""
    from onnxexec.kernels.quant.qmatmul import prepare_weight, qmatmul

    rng = np.random.default_rng(2)
    n, k = 24, 512
    raw = random_blocks(t, n * k // 256, rng)
    w = prepare_weight(raw, t, (n, k))
    assert w.layout == "raw"
    for rows in (1, 6, 13):
        x = rng.standard_normal((rows, k)).astype(np.float32)
        np.testing.assert_array_equal(qmatmul(x, w, mode="int8"), _dot_k(raw, t, n, x))
