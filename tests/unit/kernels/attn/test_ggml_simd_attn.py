"""kernels/attn/ggml_simd_attn.py: the vector q.k kernel gives the scalar loop's bits, and
both give a numpy rendering of ggml_vec_dot_f16's 4 x 8 accumulators; the one-token
attention that calls it still matches kv_attention_op (attention._attend_ggml) at
every position 0..300 and several head dims."""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import pytest

from onnxexec.kernels.attn import ggml_simd_attn as sa
from onnxexec.kernels.attn.attention import ggml_n_kv
from onnxexec.kernels.attn.llm_fused import ATTEND_ONE, rope_store_one
from onnxexec.ops.llm import kv_attention_op, rope

DIMS = [8, 16, 24, 32, 40, 48, 64, 80, 96, 128, 136, 256]


@nb.njit(cache=False)
def _all_simd(kc, hk, qv, d32, out):
    for j in range(kc.shape[0]):
        out[j] = sa.qk32_simd(kc, j, hk, qv, d32)


@nb.njit(cache=False)
def _all_portable(kc, hk, qv, d32, out):
    for j in range(kc.shape[0]):
        out[j] = sa.qk32_portable(kc, j, hk, qv, d32)


def _numpy_ref(k: np.ndarray, q: np.ndarray, d32: int) -> np.ndarray:
    """Rows of k (n, Dh) . q over d < d32 in ggml_vec_dot_f16's order (float32 numpy
    ops are IEEE operations, one per step)."""
    n = k.shape[0]
    acc = np.zeros((4, n, 8), np.float32)
    with np.errstate(all="ignore"):
        for d0 in range(0, d32, 32):
            for r in range(4):
                s = slice(d0 + 8 * r, d0 + 8 * r + 8)
                acc[r] = acc[r] + k[:, s] * q[s]
        v = (acc[0] + acc[2]) + (acc[1] + acc[3])
        t = [v[:, i] + v[:, i + 4] for i in range(4)]
        return (t[0] + t[1]) + (t[2] + t[3])


def _same(a: np.ndarray, b: np.ndarray) -> None:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    both_nan = np.isnan(a) & np.isnan(b)
    ab, bb = np.where(both_nan, 0, a.view(np.uint32)), np.where(both_nan, 0, b.view(np.uint32))
    np.testing.assert_array_equal(ab, bb)


def _halves(rng: np.random.Generator, shape: tuple[int, ...], extreme: bool) -> np.ndarray:
    x = rng.standard_normal(shape) * (2.0 ** rng.integers(-20, 16, shape) if extreme else 2.0)
    if extreme:
        special = np.array([0.0, -0.0, 65504.0, -65504.0, 2.0**-24, -(2.0**-24), np.inf, -np.inf])
        mask = rng.random(shape) < 0.05
        x = np.where(mask, rng.choice(special, shape), x)
    with np.errstate(over="ignore"):
        return x.astype(np.float16).astype(np.float32)


@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("dh", DIMS)
def test_qk32_matches_scalar_and_numpy(dh, extreme):
    rng = np.random.default_rng(dh + 1000 * extreme)
    hkv = 3
    kc = _halves(rng, (301, hkv, dh), extreme)
    qv = _halves(rng, (dh,), extreme)
    d32 = dh & ~31
    for hk in range(hkv):
        got_p = np.empty(kc.shape[0], np.float32)
        _all_portable(kc, hk, qv, d32, got_p)
        _same(got_p, _numpy_ref(kc[:, hk], qv, d32))
        if sa.AVAILABLE:
            got_s = np.empty(kc.shape[0], np.float32)
            _all_simd(kc, hk, qv, d32, got_s)
            _same(got_s, got_p)


def test_qk32_is_the_simd_kernel_on_avx2_hosts():
    assert sa.QK32 is (sa.qk32_simd if sa.AVAILABLE else sa.qk32_portable)


POSITIONS = [0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 127, 128, 200, 255, 256, 257, 299, 300]


@pytest.mark.parametrize("par", [0, 1])
@pytest.mark.parametrize("dh", [16, 40, 64, 96])
def test_attend_one_matches_kvattention_positions(dh, par):
    H, Hkv, C = 6, 2, 320
    rng = np.random.default_rng(dh)
    kc = (rng.standard_normal((C, Hkv, dh)) * 2).astype(np.float16).astype(np.float32)
    vc = rng.standard_normal((C, Hkv, dh)).astype(np.float16).astype(np.float32)
    rope_kw = dict(head_dim=dh, n_dims=dh, base=10000.0, freq_scale=1.0, style="norm")
    for pos in POSITIONS:
        qkv = (rng.standard_normal((1, (H + 2 * Hkv) * dh)) * 2).astype(np.float32)
        q, k, v = np.split(qkv, [H * dh, (H + Hkv) * dh], axis=1)
        p = np.asarray(pos, np.int64)
        kc_ref, vc_ref = kc.copy(), vc.copy()
        ref = kv_attention_op(
            rope(q, p, **rope_kw),
            rope(k, p, **rope_kw),
            v,
            kc_ref,
            vc_ref,
            p,
            head_dim=dh,
            kv_f16=1,
        )
        qr = np.empty(H * dh, np.float32)
        rope_store_one(
            qkv, 0, H * dh, (H + Hkv) * dh, kc, vc, pos, dh, dh, np.float32(10000.0),
            np.float32(1.0), False, qr,
        )  # fmt: skip
        a = np.empty((1, H * dh), np.float32)
        ATTEND_ONE[1 - par](
            qr,
            kc,
            vc,
            pos,
            np.float32(1.0),
            np.float32(1 / math.sqrt(dh)),
            0,
            np.float32(0.0),
            ggml_n_kv(pos, 1, C),
            a,
        )
        _same(a, ref)
