"""com.microsoft RotaryEmbedding against onnxruntime's CPU kernel."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._ort_node import assert_like_ort

R = np.random.default_rng(3)
B, S, N, H, MAXPOS = 2, 5, 3, 8, 20


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


CASES = {
    "3d": ((B, S, N * H), "ids", H, {}),
    "3d_num_heads": ((B, S, N * H), "ids", H, {"num_heads": N}),
    "3d_interleaved": ((B, S, N * H), "ids", H, {"interleaved": 1}),
    "4d": ((B, N, S, H), "ids", H, {}),
    "offset": ((B, S, N * H), "offset", H, {}),
    "scale_unused": ((B, S, N * H), "ids", H, {"scale": 0.5}),  # as onnxruntime's CPU kernel
    "partial": ((B, S, N * 16), "ids", 8, {"num_heads": N, "rotary_embedding_dim": 8}),
    "partial_interleaved": (
        (B, S, N * 16),
        "ids",
        8,
        {"num_heads": N, "rotary_embedding_dim": 8, "interleaved": 1},
    ),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rotary_embedding(case, dtype):
    shape, pos, rot, attrs = CASES[case]
    ids = R.integers(0, MAXPOS - S, (B, S)) if pos == "ids" else np.array([3])
    cos, sin = f32(MAXPOS, rot // 2), f32(MAXPOS, rot // 2)
    tol = 1e-4 if dtype == np.float32 else 2e-3
    args = [f32(*shape).astype(dtype), ids.astype(np.int64), cos.astype(dtype), sin.astype(dtype)]
    assert_like_ort("RotaryEmbedding", args, rtol=tol, atol=tol, **attrs)
