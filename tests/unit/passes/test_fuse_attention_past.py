"""Attention of a decode step with past KV, as optimum's text-generation-with-past
exports write it (torch SDPA: Q and K^T each scaled by sqrt(scale), Concat of the past
keys / values, an additive mask whose dims are runtime slices the shape facts cannot
name, Where(IsNaN(P), 0, P)). Oracle: onnxruntime, and every optimization level."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnxexec.passes.shape_inference import infer_shapes
from tests.unit.passes._levels import fused_ops, model, run_levels, session

ort = pytest.importorskip("onnxruntime")
node = helper.make_node


def _past_kv_attention() -> object:
    s = np.full((1,), 0.25**0.5, np.float32)  # sqrt(1 / sqrt(Dh)), Dh = 4... as SDPA does
    return model(
        [
            node("Concat", ["past_k", "k"], ["present_k"], axis=-2),
            node("Concat", ["past_v", "v"], ["present_v"], axis=-2),
            node("Transpose", ["present_k"], ["kt"], perm=[0, 1, 3, 2]),
            node("Mul", ["q", "s"], ["qs"]),
            node("Mul", ["kt", "s"], ["ks"]),
            node("MatMul", ["qs", "ks"], ["sc"]),
            node("Add", ["sc", "mask"], ["sm"]),
            node("Softmax", ["sm"], ["p"], axis=-1),
            node("IsNaN", ["p"], ["nan"]),
            node("Where", ["nan", "zero", "p"], ["pz"]),
            node("MatMul", ["pz", "present_v"], ["y"]),
        ],
        [
            ("q", ["b", 2, "t", 4]),
            ("k", ["b", 2, "t", 4]),
            ("v", ["b", 2, "t", 4]),
            ("past_k", ["b", 2, "p", 4]),
            ("past_v", ["b", 2, "p", 4]),
            # optimum slices its causal mask to runtime lengths: dims unrelated to t, p + t
            ("mask", ["mb", 1, "mt", "ms"]),
        ],
        ["y", "present_k", "present_v"],
        {"s": s, "zero": np.zeros((1,), np.float32)},
    )


def _feeds(b: int, t: int, past: int, mask_batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(26)
    f = {n: rng.standard_normal((b, 2, t, 4)).astype(np.float32) for n in ("q", "k", "v")}
    for n in ("past_k", "past_v"):
        f[n] = rng.standard_normal((b, 2, past, 4)).astype(np.float32)
    mask = np.where(rng.random((mask_batch, 1, t, past + t)) < 0.3, -np.inf, 0.0)
    mask[0, 0, 0] = -np.inf  # a fully masked row: NaN from Softmax, then 0 from Where
    f["mask"] = mask.astype(np.float32)
    return f


def _onnxruntime(m: object, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_past_kv_attention_fuses_with_unprovable_mask_dims() -> None:
    m = _past_kv_attention()
    assert fused_ops(m).count("FusedAttention") == 1


@pytest.mark.parametrize(
    ("b", "t", "past", "mask_batch"),
    [(1, 1, 7, 1), (2, 3, 5, 1), (2, 1, 6, 2)],
)
def test_past_kv_attention_matches_onnxruntime(b: int, t: int, past: int, mask_batch: int) -> None:
    m = _past_kv_attention()
    f = _feeds(b, t, past, mask_batch)
    want = _onnxruntime(m, f)
    assert np.all(want[0][0, :, 0] == 0)  # the masked row is zeros, not NaN
    for lv, got in run_levels(m, f).items():
        for w, g in zip(want, got, strict=True):
            assert g.shape == w.shape, lv
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"level {lv}")


def test_mask_broadcasting_to_more_batches_at_run_time() -> None:
    # fused on dims the facts could not prove; the mask turns out to broadcast the
    # scores to 3 batches: FusedAttention must give the graph's (3, 2, t, 4), not Q's 1
    m = _past_kv_attention()
    f = _feeds(1, 2, 3, mask_batch=3)
    want = _onnxruntime(m, f)
    assert want[0].shape == (3, 2, 2, 4)
    for lv, got in run_levels(m, f).items():
        assert got[0].shape == want[0].shape, lv
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6, err_msg=f"level {lv}")


def _tile_mask_attention() -> object:
    """An encoder-decoder's self-attention: the mask is a Tile to the runtime batch
    (optimum's Whisper decoder), so its facts come only from Tile's shape rule."""
    return model(
        [
            node("Shape", ["q"], ["qshape"], start=0, end=1),
            node("Concat", ["qshape", "ones"], ["reps"], axis=0),
            node("Tile", ["mask", "reps"], ["tiled"]),
            node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            node("MatMul", ["q", "kt"], ["sc"]),
            node("Add", ["sc", "tiled"], ["sm"]),
            node("Softmax", ["sm"], ["p"], axis=-1),
            node("MatMul", ["p", "v"], ["y"]),
        ],
        [
            ("q", ["b", 2, "t", 4]),
            ("k", ["b", 2, "t", 4]),
            ("v", ["b", 2, "t", 4]),
            ("mask", [1, 1, "t", "t"]),
        ],
        ["y"],
        {"ones": np.ones(3, np.int64)},
    )


def test_tile_shape_rule() -> None:
    g = session(_tile_mask_attention(), 0).graph
    facts = infer_shapes(g)
    assert facts["tiled"].shape == ("b", 1, "t", "t")


def test_tile_fed_mask_attention_fuses_and_matches_onnxruntime() -> None:
    m = _tile_mask_attention()
    assert fused_ops(m).count("FusedAttention") == 1
    rng = np.random.default_rng(5)
    f = {n: rng.standard_normal((2, 2, 3, 4)).astype(np.float32) for n in ("q", "k", "v")}
    f["mask"] = np.triu(np.full((1, 1, 3, 3), -np.inf, np.float32), 1)  # causal
    want = _onnxruntime(m, f)
    for lv, got in run_levels(m, f).items():
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6, err_msg=f"level {lv}")
