"""qmatmul's row fusion (fuse_rows), pre-quantized products (qmatmul_q), the chunked
relayout of large weights and release_pages."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import qmatmul as qm
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.dequant import block_geometry, dequantize

LANES_TYPES = [q.Q4_0, q.Q4_1, q.Q5_0, q.Q4_K, q.Q5_K, q.Q6_K, q.Q8_0]


def _raw(t: int, n: int, k: int, rng) -> np.ndarray:
    block, size = block_geometry(t)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    half = rng.integers(0x2000, 0x3000, raw.shape[0], dtype=np.uint16).view(np.uint8)
    for off in (0, 2, size - 2):  # the half scales of every block type used here
        raw[:, off : off + 2] = half.reshape(-1, 2)
    return raw.reshape(-1)


@pytest.mark.parametrize("t", LANES_TYPES)
def test_fuse_rows_parts_equal_separate_weights(t):
    rng = np.random.default_rng(t)
    k = 512
    shapes = [(128, k), (70, k), (64, k)]  # 70: a part that ends inside a lane group
    ws = [qm.prepare_weight(_raw(t, n, k, rng), t, (n, k)) for n, _ in shapes]
    if not qm.can_fuse_rows(ws):  # e.g. Q4_K with 70 rows stays GGUF bytes (ggml_dot_k)
        assert any(w.layout == "raw" for w in ws)
        return
    fused, parts = qm.fuse_rows(ws)
    # each part starts on a group of LANES = 64 rows
    assert [p.col0 for p in parts] == [0, 128, 256] and all(p.parent is fused for p in parts)
    x = rng.standard_normal((2, k)).astype(np.float32)
    both = qm.qmatmul(x, fused, mode="int8")
    if qm.int8_path(fused, 2, "int8"):  # the same from activations quantized once
        xq, xst = quantize_act(x)
        shared = qm.qmatmul_q(xq, xst, fused, np.empty((2, fused.shape[0]), np.float32))
        np.testing.assert_array_equal(shared, both)
    for w, p in zip(ws, parts, strict=True):
        want = qm.qmatmul(x, w, mode="int8")
        np.testing.assert_array_equal(qm.qmatmul(x, p, mode="int8"), want)
        np.testing.assert_array_equal(both[:, p.col0 : p.col0 + p.shape[0]], want)
        np.testing.assert_array_equal(
            qm.qmatmul(x, p, mode="float"), qm.qmatmul(x, w, mode="float")
        )
        np.testing.assert_array_equal(
            qm.qembedding(p, np.array([0, 5, p.shape[0] - 1])),
            qm.qembedding(w, np.array([0, 5, w.shape[0] - 1])),
        )


def test_fuse_rows_rejects_mixed_types():
    rng = np.random.default_rng(0)
    a = qm.prepare_weight(_raw(q.Q4_K, 64, 256, rng), q.Q4_K, (64, 256))
    b = qm.prepare_weight(_raw(q.Q6_K, 64, 256, rng), q.Q6_K, (64, 256))
    assert not qm.can_fuse_rows([a, b])
    with pytest.raises(ValueError):
        qm.fuse_rows([a, b])


@pytest.mark.parametrize("t", [q.Q4_K, q.Q6_K, q.Q8_0, q.Q5_1])
def test_chunked_relayout_equals_one_piece(t, monkeypatch):
    rng = np.random.default_rng(1)
    n, k = 300, 256
    raw = _raw(t, n, k, rng)
    whole = qm.prepare_weight(raw, t, (n, k))
    monkeypatch.setattr(qm, "RELAYOUT_ROWS", 128)
    chunked = qm.prepare_weight(raw, t, (n, k))
    for key, a in whole.arrays.items():
        np.testing.assert_array_equal(np.asarray(chunked.arrays[key]), np.asarray(a))
    ids = np.arange(n)
    np.testing.assert_array_equal(
        qm.qembedding(chunked, ids), dequantize(raw, t, (n, k)).reshape(n, k)
    )


def test_release_pages_keeps_the_data(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, 3 * 4096 + 100, dtype=np.uint8)
    path = tmp_path / "blob"
    data.tofile(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    view = mm[100:]
    qm.release_pages(view)  # a hint only: the bytes read back the same
    np.testing.assert_array_equal(np.asarray(view), data[100:])
    qm.release_pages(data)  # not a memmap: no-op
