"""kernels/quant/vnni_q4k.py: the repacked Q4_K (AVX-512 VNNI) gives ggml_simd_k's bits.

The oracle is ggml_simd_k's kernel on the GGUF bytes (llama.cpp's repacked
q4_K_8x8_q8_K order, itself checked against the readable ggml_dot_k in
test_ggml_simd_k.py and against llama.cpp in tests/parity): every activation row
count around the 4-row gemm groups (gemm and gemv orders in one call), several weights
in one call (Q|K|V beside a Q6_K), spans that cut 8-row groups (n_chunks), the
extremes of every integer field (nibbles 15, 6-bit scales and mins 63, activations
+-127), and qmatmul / prepare_weight end to end."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import ggml_simd_k, vnni_q4k
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_dot import simd_dot_many
from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k8
from onnxexec.kernels.quant.qmatmul import QWeight, prepare_weight, qmatmul, simd_operand
from tests.unit.kernels._qblocks import random_blocks

pytestmark = pytest.mark.skipif(not vnni_q4k.ENABLED, reason="host without AVX-512 VNNI / VL")


def _weight(n: int, k: int, seed: int, extreme: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = random_blocks(q.Q4_K, n * k // 256, rng).reshape(-1, q.Q4_K_BYTES)
    if extreme:  # every 6-bit scale / min 63, every nibble 15, in half the blocks
        raw[::2, 4:16] = 0xFF
        raw[::2, 16:] = 0xFF
    return raw.reshape(-1)


def _x(t: int, k: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((t, k)).astype(np.float32)
    x[:, :32] = -1.0  # quantizes to -127 (the activations' extreme)
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32)


@pytest.mark.parametrize("t_rows", [1, 2, 4, 5, 8, 11])
@pytest.mark.parametrize(("n", "k"), [(8, 256), (24, 512)])
def test_packed_equals_gguf_kernel(t_rows, n, k):
    raw = _weight(n, k, seed=n + t_rows, extreme=True)
    pk = vnni_q4k.repack(raw, n, k)
    assert pk.shape == raw.shape
    x = _x(t_rows, k, seed=t_rows)
    rb = raw.size // n
    want = simd_dot_many([(raw, rb, q.Q4_K)], None, None, np.empty((t_rows, n), np.float32), x)
    got = np.full((t_rows, n), np.nan, np.float32)
    simd_dot_many([(pk, rb, vnni_q4k.PACKED_Q4_K)], None, None, got, x)
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("n_chunks", [1, 3, 7])
@pytest.mark.parametrize("t_rows", [1, 6])
def test_several_weights_and_spans(n_chunks, t_rows):
    """Q|K|V-like weights (two packed, one Q6_K) in one call, cut into n_chunks spans of
    4-row groups (so spans start inside 8-row groups): the same bits per column."""
    k = 256
    raws = [_weight(n, k, seed=n) for n in (16, 40)]
    rng = np.random.default_rng(9)
    q6 = random_blocks(q.Q6_K, 12 * k // 256, rng)
    x = _x(t_rows, k, seed=3)
    rows4 = t_rows - t_rows % 4
    n_tot = 16 + 40 + 12
    gguf = [(raws[0], 144, q.Q4_K), (raws[1], 144, q.Q4_K)]
    packed = [(vnni_q4k.repack(r, r.size // 144, k), 144, vnni_q4k.PACKED_Q4_K) for r in raws]
    outs = []
    for ws in (gguf, packed):
        xk = quantize_q8_k8(x, rows4)
        ws = [*ws, (q6, q6.size // 12, q.Q6_K)]
        kinds = tuple(ggml_simd_k.kind_of(t) for _, _, t in ws)
        out = np.full((t_rows, n_tot), np.nan, np.float32)
        ggml_simd_k.DOT_MANY[1](  # the serial twin: the chunks run one after another
            tuple(w for w, _, _ in ws),
            tuple(rb for _, rb, _ in ws),
            kinds,
            (0, 16, 56),
            np.zeros((1, 32), np.int8),
            np.zeros((1, 3, 1), np.float32),
            *xk,
            rows4,  # the same Q8_K set for both variants (Q6_K columns: the same kernel)
            out,
            n_chunks,
            4,
        )
        outs.append(out)
    assert not np.isnan(outs[1]).any()
    np.testing.assert_array_equal(_bits(outs[1]), _bits(outs[0]))


@pytest.mark.parametrize("t_rows", [1, 4, 7])
def test_prepare_weight_packs_and_qmatmul_matches(t_rows):
    n, k = 32, 512
    raw = _weight(n, k, seed=1)
    w = prepare_weight(raw, q.Q4_K, (n, k))
    assert "packed" in w.arrays
    assert simd_operand(w)[2] == vnni_q4k.PACKED_Q4_K
    plain = QWeight(q.Q4_K, (n, k), "raw", {"raw": raw, "row_bytes": raw.size // n})
    assert simd_operand(plain)[2] == q.Q4_K
    x = _x(t_rows, k, seed=7)
    got = qmatmul(x, w, mode="int8")
    want = qmatmul(x, plain, mode="int8")
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_packed_copy_keeps_the_gguf_bytes_flags():
    """A read-only (memmapped) weight gives a read-only copy: one call's weights must
    be one numba array type (the model's Q6_K bytes stay read-only beside it)."""
    raw = _weight(16, 256, seed=2)
    raw.flags.writeable = False
    w = prepare_weight(raw, q.Q4_K, (16, 256))
    assert not w.arrays["packed"].flags.writeable
    q6 = random_blocks(q.Q6_K, 8, np.random.default_rng(0))
    q6.flags.writeable = False
    x = _x(1, 256, seed=1)
    ws = [simd_operand(w), (q6, q6.size // 8, q.Q6_K)]
    got = simd_dot_many(ws, None, None, np.empty((1, 24), np.float32), x)
    want = simd_dot_many([(raw, 144, q.Q4_K), ws[1]], None, None, np.empty((1, 24), np.float32), x)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_not_packed_when_rows_not_a_multiple_of_8():
    assert vnni_q4k.packable(q.Q4_K, 16) and not vnni_q4k.packable(q.Q4_K, 12)
    assert not vnni_q4k.packable(q.Q6_K, 16)
