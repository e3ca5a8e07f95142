"""kernels/attn/rope.py against the rotate-half formula written out in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.attn.rope import rope


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _want(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    # y[:h] = x1 cos - x2 sin; y[h:] = x2 cos + x1 sin (each rounded like Mul, Mul, Add)
    c, s = np.broadcast_to(cos, x.shape), np.broadcast_to(sin, x.shape)
    lo = x1 * c[..., :h] + (-x2) * s[..., :h]
    hi = x2 * c[..., h:] + x1 * s[..., h:]
    return np.concatenate([lo, hi], axis=-1)


@pytest.mark.parametrize("cs_shape", [(1, 1, 7, 8), (2, 1, 7, 8), (7, 8), (2, 3, 7, 8)])
def test_rope_broadcast_tables(cs_shape) -> None:
    x = _rand(2, 3, 7, 8)
    cos, sin = _rand(*cs_shape, seed=1), _rand(*cs_shape, seed=2)
    np.testing.assert_array_equal(rope(x, cos, sin), _want(x, cos, sin))


def test_rope_strided_input() -> None:
    base = _rand(2, 5, 3, 16)  # (B, T, H, D) -> the (B, H, T, D) Transpose view
    x = base.transpose(0, 2, 1, 3)
    cos, sin = _rand(1, 1, 5, 16, seed=1), _rand(1, 1, 5, 16, seed=2)
    got = rope(x, cos, sin)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, _want(x, cos, sin))


def test_rope_rejects_odd_width() -> None:
    with pytest.raises(ValueError):
        rope(_rand(1, 1, 2, 5), _rand(1, 1, 2, 5), _rand(1, 1, 2, 5))


def test_fused_rotary_op_float16_and_float32() -> None:
    from onnxexec.ops.fused_rope import fused_rotary

    x = _rand(1, 2, 3, 4)
    cos, sin = _rand(1, 1, 3, 4, seed=1), _rand(1, 1, 3, 4, seed=2)
    np.testing.assert_array_equal(fused_rotary(x, cos, sin), _want(x, cos, sin))
    h = fused_rotary(x.astype(np.float16), cos.astype(np.float16), sin.astype(np.float16))
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, _want(x, cos, sin), atol=2e-2)
