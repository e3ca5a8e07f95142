"""qmatmul / qembedding vs dequantize (gguf-py-exact) + numpy matmul, every type.

Run also with NUMBA_DISABLE_JIT=1 (shapes are small so the Python bodies stay fast).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from onnxexec.kernels.math.lanes import LANES
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.dequant import dequantize
from onnxexec.kernels.quant.qmatmul import (
    BLAS_MIN_T,
    FAST_TYPES,
    is_fast,
    prepare_weight,
    qembedding,
    qmatmul,
)
from tests.unit.kernels._qblocks import (
    QUANT_TYPES,
    geometry,
    mismatch_report,
    name,
    random_blocks,
)
from tests.unit.kernels._qref import dequantized_activations, quantize_act_ref

JIT = not numba.config.DISABLE_JIT
# N not a multiple of LANES: exercises the padded last group; K = 512 spans two K-quant
# super-blocks (256 when the kernels run as Python, to stay fast)
N, K = 70, 512 if JIT else 256
FLOAT_TYPES = (q.F32, q.F16, q.BF16)
ALL = (*FLOAT_TYPES, *QUANT_TYPES)
# weight = scale * integer quant, no per-block offset: the int8 path is then exactly
# sum_b (d_w * xd) * (integer dot), which float64 reproduces to rounding
NO_MIN_TYPES = (q.Q4_0, q.Q5_0, q.Q8_0, q.Q6_K)


def _weight(t: int, seed: int = 0, n: int = N, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """(raw bytes, gguf-py-dequantized float32 (n, k)) of a random weight."""
    rng = np.random.default_rng(seed + t)
    if t in FLOAT_TYPES:
        w = rng.standard_normal((n, k)).astype(np.float32)
        raw = {q.F32: w, q.F16: w.astype(np.float16)}.get(t)
        if raw is None:  # BF16: truncate the float32 bits
            raw = (w.view(np.uint32) >> 16).astype(np.uint16)
        raw = raw.reshape(-1).view(np.uint8)
    else:
        block, _ = geometry(t)
        raw = random_blocks(t, n * k // block, rng)
    return raw, dequantize(raw, t, (n, k))


def _x(t_rows: int, seed: int = 1, k: int = K) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((t_rows, k)) * rng.uniform(0.1, 10, (t_rows, 1))).astype(np.float32)


def test_activation_quantization_matches_llama_cpp_reference() -> None:
    x = _x(3, k=128)
    x[0, :32] = 0.0  # all-zero block: d = 0, q = 0
    x[1, :32] = np.arange(32) - 15.5  # amax 16.5: many exact halves after scaling
    x[2, :32] = np.linspace(-127, 127, 32) * 1e4
    x[2, 32:64] = [2.5, -2.5, 0.5, -0.5, 127.0] + [1.5] * 27  # amax 127: x*inv = x, ties
    xq, xst = quantize_act(x)
    rq, rd, rs, rsum = quantize_act_ref(x)
    np.testing.assert_array_equal(xq, rq)
    np.testing.assert_array_equal(xst[:, 0], rd)
    np.testing.assert_array_equal(xst[:, 1], rs)
    np.testing.assert_array_equal(xst[:, 2], rsum)
    assert list(xq[2, 32:36]) == [2, -2, 0, 0]  # half-even, as _mm256_round_ps


@pytest.mark.parametrize("t", ALL, ids=name)
def test_qembedding_bit_exact(t: int) -> None:
    raw, w = _weight(t)
    ids = np.array([0, 69, 5, 64, 5, 63])
    got = qembedding(prepare_weight(raw, t, (N, K)), ids)
    report = mismatch_report(got, w[ids], raw, t if t not in FLOAT_TYPES else q.F32)
    assert report is None, report


@pytest.mark.parametrize("t", ALL, ids=name)
def test_float_path_panels_bit_exact(t: int) -> None:
    """One-hot rows through the dequantized panels + BLAS give W^T back exactly."""
    raw, w = _weight(t, n=N, k=256)
    eye = np.eye(256, dtype=np.float32)[::5]
    got = qmatmul(eye, prepare_weight(raw, t, (N, 256)), mode="float")
    np.testing.assert_array_equal(got, w.T[::5])


@pytest.mark.parametrize("t_rows", [1, 7])
@pytest.mark.parametrize("t", ALL, ids=name)
def test_float_mode_matches_dequant_matmul(t: int, t_rows: int) -> None:
    raw, w = _weight(t)
    x = _x(t_rows)
    got = qmatmul(x, prepare_weight(raw, t, (N, K)), mode="float")
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    scale = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64)
    assert np.all(np.abs(got - ref) <= 1e-5 * scale + 1e-30), name(t)


@pytest.mark.parametrize("t_rows", [1, 7])
@pytest.mark.parametrize("t", QUANT_TYPES, ids=name)
def test_int8_mode_matches_reference(t: int, t_rows: int) -> None:
    """int8 path == dequantized W @ dequantized int8 activations (llama.cpp's numerics).

    Types without a per-block min match to float rounding; with a min (Q4_1, Q5_1,
    Q4_K, Q5_K) llama.cpp's Q8_1 s = half(d * sum q) replaces xd * sum q, a relative
    difference of at most 2^-11 on the min term.
    """
    raw, w = _weight(t)
    x = _x(t_rows)
    wq = prepare_weight(raw, t, (N, K))
    got = qmatmul(x, wq, mode="int8")
    k_quant = t in (q.Q2_K, q.Q3_K, q.Q4_K, q.Q5_K, q.Q6_K)
    if not is_fast(t) and not k_quant:  # no int8 kernel: the float path is used
        np.testing.assert_array_equal(got, qmatmul(x, wq, mode="float"))
        return
    if k_quant:  # llama.cpp quantizes the activations of K-quant matmuls to Q8_K
        from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k

        xq, xd, _ = quantize_q8_k(x, x.shape[0] - x.shape[0] % 4 if t == q.Q4_K else 0)
        xh = (xq.reshape(len(x), -1, 256) * xd[..., None].astype(np.float64)).reshape(x.shape)
    else:
        xh = dequantized_activations(x)
    ref = xh @ w.T.astype(np.float64)
    scale = np.abs(xh) @ np.abs(w.T).astype(np.float64)
    tol = 2e-6 if t in NO_MIN_TYPES else 5e-4
    err = np.abs(got - ref) / scale
    assert err.max() <= tol, f"{name(t)}: relative error {err.max():.2e} > {tol}"


@pytest.mark.parametrize("t", sorted(FAST_TYPES), ids=name)
def test_int8_close_to_float(t: int) -> None:
    """Rounding activations to 8 bits moves results by well under 1% of their scale."""
    raw, w = _weight(t)
    x = _x(4)
    wq = prepare_weight(raw, t, (N, K))
    a = qmatmul(x, wq, mode="int8")
    b = qmatmul(x, wq, mode="float")
    scale = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64)
    assert (np.abs(a - b) / scale).max() < 1e-2


def test_auto_mode_and_out_argument() -> None:
    raw, _ = _weight(q.Q4_1)
    w = prepare_weight(raw, q.Q4_1, (N, K))
    x1, xb = _x(1), _x(BLAS_MIN_T)
    np.testing.assert_array_equal(qmatmul(x1, w), qmatmul(x1, w, mode="int8"))
    np.testing.assert_array_equal(qmatmul(xb, w), qmatmul(xb, w, mode="float"))
    out = np.full((1, N), np.nan, np.float32)
    assert qmatmul(x1, w, out=out) is out
    np.testing.assert_array_equal(out, qmatmul(x1, w, mode="int8"))
    assert qmatmul(np.zeros((0, K), np.float32), w).shape == (0, N)


@pytest.mark.skipif(not JIT, reason="prange is a plain loop without the JIT")
@pytest.mark.parametrize("t", [q.Q4_0, q.Q5_K, q.Q8_0, q.Q6_K], ids=name)
def test_thread_count_does_not_change_results(t: int) -> None:
    """Each output row sums its blocks in a fixed order: 1 or 2 threads, same bits."""
    raw, _ = _weight(t, n=300)
    w = prepare_weight(raw, t, (300, K))
    x = _x(2)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = qmatmul(x, w, mode="int8")
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = qmatmul(x, w, mode="int8")
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, two)


def test_layouts_and_memory() -> None:
    """Fast types are relayouted to about their GGUF size, never to float32."""
    for t in QUANT_TYPES:
        raw, _ = _weight(t, n=2 * LANES)
        w = prepare_weight(raw, t, (2 * LANES, K))
        assert w.layout == ("raw" if t not in FAST_TYPES else w.layout)
        # bytes the relayout allocates: a VNNI repack (vnni_q4k) also keeps a view of
        # the GGUF bytes it came from (mapped from the file in a model), not a copy
        made = sum(
            a.nbytes
            for a in w.arrays.values()
            if isinstance(a, np.ndarray) and not np.shares_memory(a, raw)
        )
        assert made <= 1.35 * raw.nbytes, (name(t), made, raw.nbytes)
    raw, _ = _weight(q.F32)
    w = prepare_weight(raw, q.F32, (N, K))
    assert w.layout == "f32" and np.shares_memory(w.arrays["w"], raw)
    assert "Q4_K" in repr(prepare_weight(_weight(q.Q4_K)[0], q.Q4_K, (N, K)))


def test_errors() -> None:
    raw, _ = _weight(q.Q8_0)
    w = prepare_weight(raw, q.Q8_0, (N, K))
    with pytest.raises(ValueError, match=rf"x must be \(T, {K}\)"):
        qmatmul(np.zeros((1, K + 32), np.float32), w)
    with pytest.raises(ValueError, match="mode"):
        qmatmul(np.zeros((1, K), np.float32), w, mode="fast")
    with pytest.raises(ValueError, match="out must be"):
        qmatmul(np.zeros((1, K), np.float32), w, out=np.zeros((1, N), np.float64))
    with pytest.raises(ValueError, match="expected"):
        prepare_weight(raw[:-1], q.Q8_0, (N, K))
    with pytest.raises(NotImplementedError, match="IQ2_XXS"):
        prepare_weight(np.zeros(66, np.uint8), q.IQ2_XXS, (1, 256))
    with pytest.raises(IndexError, match="id 70"):
        qembedding(w, [1, 70])
