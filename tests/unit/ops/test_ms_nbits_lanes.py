"""MatMulNBits on the GGUF lanes kernels (ops/contrib/nbits_lanes.py: level 4 int8,
level 0 dequantized panels): decode-shaped (one row) and prompt-shaped products,
blocks 32 / 64 / 128, with and without zero points, N not a multiple of the 64-row
lane groups; against onnxruntime and a float64 evaluation of MLAS CompInt8."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant.nbits_act import quantize_act_blocks
from onnxexec.ops.contrib import nbits_lanes
from tests.unit.ops._ms_node import ours_and_ort

RNG = np.random.default_rng(2311)


def _weights(n: int, k: int, block: int, zp_kind: str):
    kb = k // block
    b = RNG.integers(0, 256, (n, kb, block // 2)).astype(np.uint8)
    scales = RNG.uniform(0.01, 0.05, (n, kb)).astype(np.float32)
    zp = None
    if zp_kind == "packed":
        zp = RNG.integers(0, 256, (n, -(-kb // 2))).astype(np.uint8)
    elif zp_kind == "eights":  # explicit default zero points: the symmetric form
        zp = np.full((n, -(-kb // 2)), 0x88, np.uint8)
    return b, scales, zp


def _act_reference(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """MLAS QuantizeARow_CompInt8 in numpy: per block scale amax / 127 (float32) and
    q = round-half-even(x * (127 / amax))."""
    t, k = x.shape
    blocks = x.reshape(t, k // block, block)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    inv = np.divide(np.float32(127), amax, out=np.zeros_like(amax), where=amax > 0)
    q = np.rint(blocks * inv).astype(np.int64)
    return q.reshape(t, k), (amax / np.float32(127)).astype(np.float32)[..., 0]


@pytest.mark.parametrize("block", [32, 64, 128])
def test_activation_quantization_matches_mlas_formula(block: int) -> None:
    x = RNG.normal(size=(3, 512)).astype(np.float32)
    x[1, :block] = 0  # an all-zero block: scale 0, codes 0
    xq, xst = quantize_act_blocks(x, block)
    want_q, want_s = _act_reference(x, block)
    np.testing.assert_array_equal(xq, want_q)
    per = block // 32  # each 32-value sub-block carries its block's scale
    np.testing.assert_array_equal(xst[:, 0], np.repeat(want_s, per, axis=1))
    sums = want_q.reshape(3, -1, 32).sum(axis=-1)
    np.testing.assert_array_equal(xst[:, 2], sums)


def test_activation_quantization_rejects_bad_block() -> None:
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize_act_blocks(np.zeros((1, 96), np.float32), 64)


@pytest.mark.parametrize("rows", [1, 20])  # the matvec and the tiled prompt kernel
@pytest.mark.parametrize("zp_kind", ["none", "eights", "packed"])
@pytest.mark.parametrize("block", [32, 64, 128])
def test_exact_against_float64_compint8(block: int, zp_kind: str, rows: int) -> None:
    """Each block's product is an exact integer sum scaled by float32 scales (no half
    rounding of either scale): equal to a float64 evaluation up to float32 sums."""
    n, k = 130, 512
    b, scales, zp = _weights(n, k, block, zp_kind)
    x = RNG.normal(size=(rows, k)).astype(np.float32)
    got = nbits_lanes.matmul_lanes(x, b, scales, zp, n, k, block=block)
    q, sa = _act_reference(x, block)
    vals = np.stack([b & 15, b >> 4], axis=-1).reshape(n, k).astype(np.int64)
    if zp is None:
        z = np.full((n, k // block), 8)
    else:
        z = np.stack([zp & 15, zp >> 4], axis=-1).reshape(n, -1)[:, : k // block]
    w = (vals.reshape(n, -1, block) - z[..., None]).astype(np.int64)
    isum = np.einsum("nbk,tbk->tnb", w, q.reshape(rows, -1, block))  # exact integers
    want = (isum * scales.astype(np.float64) * sa.astype(np.float64)[:, None]).sum(axis=2)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("level", [0, 4])
@pytest.mark.parametrize("rows", [1, 5, 37])  # 37: the tiled prompt kernel
@pytest.mark.parametrize("zp_kind", ["none", "eights", "packed"])
@pytest.mark.parametrize("block", [32, 64, 128])
def test_matmul_nbits_like_onnxruntime(block: int, zp_kind: str, rows: int, level: int) -> None:
    n, k = 200, 512  # 200 rows: 4 lane groups, the last one padded
    b, scales, zp = _weights(n, k, block, zp_kind)
    a = RNG.normal(size=(1, rows, k)).astype(np.float32)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block, "accuracy_level": level}
    (got,), (want,) = ours_and_ort("MatMulNBits", [a, b, scales, zp], **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_unplanned_weight_equals_planned() -> None:
    """B fed at run time (no prepare state) takes the same kernels as a planned B."""
    n, k, block = 96, 256, 64
    b, scales, zp = _weights(n, k, block, "packed")
    a = RNG.normal(size=(2, k)).astype(np.float32)
    state = nbits_lanes.prepare(b, scales, zp, n, k, block)
    planned = nbits_lanes.matmul_lanes(a, b, scales, zp, n, k, state, block)
    fresh = nbits_lanes.matmul_lanes(a, b.copy(), scales, zp, n, k, state, block)
    np.testing.assert_array_equal(planned, fresh)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block, "accuracy_level": 4}
    (_,), (want,) = ours_and_ort("MatMulNBits", [a, b, scales, zp], **attrs)
    np.testing.assert_allclose(fresh, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("level", [0, 4])
def test_no_rows(level: int) -> None:
    n, k, block = 70, 128, 32
    b, scales, zp = _weights(n, k, block, "none")
    a = np.zeros((2, 0, k), np.float32)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block, "accuracy_level": level}
    (got,), (want,) = ours_and_ort("MatMulNBits", [a, b, scales, zp], **attrs)
    assert got.shape == want.shape == (2, 0, n)


@pytest.mark.parametrize("rows", [1, 3, 24])
def test_pool_spans_equal_one_thread(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """Spans of row groups shared with the native pool (cores free) give the same bits
    as the calling thread alone (cores busy): each output row is one kernel's sum."""
    from onnxexec.runtime.threads import set_threads

    n, k, block = 640, 256, 32
    b, scales, zp = _weights(n, k, block, "none")
    a = RNG.normal(size=(rows, k)).astype(np.float32)
    state = nbits_lanes.prepare(b, scales, zp, n, k, block)
    set_threads(2)
    try:
        monkeypatch.setattr(nbits_lanes, "SPAN_MACS", 1)  # one group per span
        monkeypatch.setattr(nbits_lanes, "free_cores", lambda: True)
        shared = nbits_lanes.matmul_lanes(a, b, scales, zp, n, k, state, block)
        monkeypatch.setattr(nbits_lanes, "free_cores", lambda: False)
        monkeypatch.setattr(nbits_lanes, "BUSY_MACS", 1 << 62)
        alone = nbits_lanes.matmul_lanes(a, b, scales, zp, n, k, state, block)
    finally:
        set_threads(0)
    np.testing.assert_array_equal(shared, alone)
