"""The K-quant prompt / decode fast paths give llama.cpp's bits.

kernels/quant/ggml_simd_ktile.py computes the Q4_K (gemm and gemv orders) and tiled Q6_K
products for tiles of weight rows x activation rows with transposed horizontal sums;
ggml_dot_k.quantize_q8_k8 quantizes to Q8_K in int8. References: ggml_dot_k.dot_k
(the orders written out per output in scalar numba), the numpy reference of
test_ggml_dot_k.py, and quantize_q8_k (int32)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import ggml_simd, ggml_simd_k
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k, quantize_q8_k8
from tests.unit.kernels._qblocks import extreme_blocks, random_blocks
from tests.unit.kernels.quant.test_ggml_dot_k import _reference
from tests.unit.kernels.quant.test_ggml_simd_k import _dot_k

pytestmark = pytest.mark.skipif(not ggml_simd.AVAILABLE, reason="host without AVX2/FMA/F16C")
KIND = {q.Q4_K: ggml_simd_k.Q4_K_KIND, q.Q6_K: ggml_simd_k.Q6_K_KIND}


def _dot_many(raw, t, n, x, cols=ggml_simd.COLS, parallel=False):
    """ggml_simd_k.DOT_MANY on one weight, activations quantized as simd_dot_many does."""
    rows = x.shape[0]
    rows4 = rows - rows % 4 if t == q.Q4_K else 0
    xk = quantize_q8_k8(x, rows4)
    out = np.full((rows, n), np.nan, np.float32)
    x8 = np.zeros((1, 32), np.int8)
    xst = np.zeros((1, 3, 1), np.float32)
    args = ((raw,), (raw.size // n,), (KIND[t],), (0,), x8, xst, *xk, rows4, out)
    if parallel:
        ggml_simd_k.DOT_MANY[0](*args, 5, cols)
    else:
        ggml_simd_k.DOT_MANY[1](*args, 1, cols)
    return out


@pytest.mark.parametrize("t", [q.Q4_K, q.Q6_K], ids=q.type_name)
@pytest.mark.parametrize(("n", "k", "rows"), [(64, 768, 128), (32, 512, 21), (24, 256, 16)])
def test_prompt_tiles_match_dot_k(t, n, k, rows):
    """Whole prompts: COLS x ROWS tiles, the T % 4 gemv rows of Q4_K, Q6_K's tiled order."""
    rng = np.random.default_rng(n + rows)
    raw = random_blocks(t, n * k // 256, rng)
    x = (rng.standard_normal((rows, k)) * rng.uniform(0.1, 10, (rows, 1))).astype(np.float32)
    got = _dot_many(raw, t, n, x)
    np.testing.assert_array_equal(got, _dot_k(raw, t, n, x))
    np.testing.assert_array_equal(_dot_many(raw, t, n, x, parallel=True), got)


@pytest.mark.parametrize("t", [q.Q4_K, q.Q6_K], ids=q.type_name)
@pytest.mark.parametrize("rows", [1, 4, 8, 12])
def test_one_activation_row_per_call(t, rows):
    """cols = 1 (ggml_dot.MULTI off): the ROWS x 1 tiles, against the numpy reference."""
    rng = np.random.default_rng(rows)
    n, k = 16, 512
    raw = random_blocks(t, n * k // 256, rng)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    got = _dot_many(raw, t, n, x, cols=1)
    np.testing.assert_array_equal(got, _reference(raw, t, n, k, x))
    np.testing.assert_array_equal(got, _dot_many(raw, t, n, x))


@pytest.mark.parametrize("t", [q.Q4_K, q.Q6_K], ids=q.type_name)
@pytest.mark.parametrize("rows", [1, 8, 16])
def test_tiles_with_extreme_scales(t, rows):
    """Zero / subnormal / inf / nan halves propagate lane by lane as in dot_k."""
    rng = np.random.default_rng(9)
    raw = extreme_blocks(t, rng)
    size = q.Q4_K_BYTES if t == q.Q4_K else q.Q6_K_BYTES
    nblk = raw.size // size
    n = nblk - nblk % 8
    raw = raw[: n * size]
    x = rng.standard_normal((rows, 256)).astype(np.float32)
    np.testing.assert_array_equal(_dot_many(raw, t, n, x), _dot_k(raw, t, n, x))


def test_quantize_q8_k8_ties_and_zero_blocks():
    """Both +amax and -amax in a block (the rows4 rule), all-zero blocks, tiny values."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((9, 768)).astype(np.float32)
    x[0, :256] = 0.0
    x[1, 10], x[1, 20] = -5.0, 5.0  # -amax first
    x[5, 300], x[5, 301] = 7.0, -7.0
    x[6] *= np.float32(1e-30)
    x[7, 512:] = -0.0
    for rows4 in (0, 4, 8):
        want = quantize_q8_k(x, rows4)
        got = quantize_q8_k8(x, rows4)
        assert got[0].dtype == np.int8
        np.testing.assert_array_equal(got[0].astype(np.int32), want[0])
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
    assert quantize_q8_k8(x, 4)[1][1, 0] != quantize_q8_k8(x, 0)[1][1, 0]  # the rule bites
