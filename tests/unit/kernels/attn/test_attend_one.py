"""kernels/attn/attend_one.py: one-token attention over a half-valued KV cache.

Bit for bit against attention.kv_attention(ggml=True) (the ggml_vec_dot_f16-order
reference the kernel replaces), and within tolerance of a float64 numpy attention,
over positions around the 8/32/256 boundaries, sliding windows, softcap, q_scale,
GQA groupings and head dims (incl. Dh % 32 != 0 and Dh % 8 != 0), serial and
parallel twins; the vector building blocks against their portable twins.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import pytest

from onnxexec.kernels.attn import ggml_simd_attn as sa
from onnxexec.kernels.attn.attend_one import ATTEND_ONE, attend_kernel
from onnxexec.kernels.attn.attention import ggml_n_kv, kv_attention
from onnxexec.kernels.attn.llm_fused import ATTEND_ONE as REEXPORTED

CASES = [  # H, Hkv, Dh, C, window, softcap, q_scale
    (9, 3, 64, 512, 0, 0.0, 1.0),  # SmolLM2-135M
    (8, 1, 64, 448, 0, 0.0, 0.5),  # one KV head for all
    (4, 4, 128, 320, 0, 30.0, 1.0),  # no GQA, softcap
    (6, 2, 40, 300, 0, 0.0, 1.0),  # Dh % 32 != 0: q.k leftovers in double
    (3, 1, 36, 200, 0, 0.0, 1.0),  # Dh % 8 != 0; n_kv = 200: cells >= 192 leftovers
    (4, 2, 64, 512, 100, 0.0, 1.0),  # sliding window
    (2, 2, 16, 64, 8, 50.0, 0.25),  # window + softcap + q_scale, Dh < 32
]
POSITIONS = [0, 1, 7, 8, 31, 32, 33, 63, 64, 100, 133, 190, 199, 255, 256, 257, 300, 400, 447]


def _halves(rng: np.random.Generator, shape: tuple[int, ...], s: float) -> np.ndarray:
    return (rng.standard_normal(shape) * s).astype(np.float16).astype(np.float32)


def _f64_attention(q, kc, vc, p, scale, window, softcap, q_scale, Hkv):
    """Plain float64 attention of one query row (H*Dh,) over cells [lo, p]."""
    Dh = kc.shape[2]
    H = q.shape[0] // Dh
    lo = max(0, p - window + 1) if window > 0 else 0
    out = np.empty(H * Dh)
    for h in range(H):
        hk = h // (H // Hkv)
        qh = q[h * Dh : (h + 1) * Dh].astype(np.float64) * q_scale
        s = kc[lo : p + 1, hk].astype(np.float64) @ qh
        if softcap > 0:
            s = softcap * np.tanh(s / softcap)
        s = s * scale
        w = np.exp(s - s.max())
        out[h * Dh : (h + 1) * Dh] = (w / w.sum()) @ vc[lo : p + 1, hk].astype(np.float64)
    return out


@pytest.mark.parametrize("par", [0, 1])
@pytest.mark.parametrize("case", CASES)
def test_attend_one_bits_and_f64(case, par):
    H, Hkv, Dh, C, window, softcap, q_scale = case
    rng = np.random.default_rng(H * 1000 + Dh)
    kc = _halves(rng, (C, Hkv, Dh), 2.0)
    vc = _halves(rng, (C, Hkv, Dh), 1.0)
    scale = 1 / math.sqrt(Dh)
    for p in [x for x in POSITIONS if x < C]:
        q = (rng.standard_normal(H * Dh) * 2).astype(np.float32)
        a = np.full((1, H * Dh), np.nan, np.float32)
        ATTEND_ONE[1 - par](
            q, kc, vc, p, np.float32(q_scale), np.float32(scale), window,
            np.float32(softcap), ggml_n_kv(p, 1, C), a,
        )  # fmt: skip
        qs = q[None] * np.float32(q_scale) if q_scale != 1.0 else q[None]
        ref = kv_attention(qs, kc, vc, p, scale, window, softcap, ggml=True)
        np.testing.assert_array_equal(a.view(np.uint32), ref.view(np.uint32), err_msg=str(p))
        f64 = _f64_attention(q, kc, vc, p, scale, window, softcap, q_scale, Hkv)
        np.testing.assert_allclose(a[0], f64, rtol=0, atol=2e-3 * np.abs(vc).max())


def test_reexported_and_kernel_choice():
    assert REEXPORTED is ATTEND_ONE
    assert attend_kernel(576, 1) is ATTEND_ONE[1]
    assert attend_kernel(576, 4096) in ATTEND_ONE


@nb.njit(cache=False)
def _scores(f, kc, hk, qv, h0, ng, d32, s, j0, nblk, jmax, vc):
    f(kc, hk, qv, h0, ng, d32, s, j0, nblk, jmax, vc)


@nb.njit(cache=False)
def _slots(f, vc, hk, s, h0, ng, base, j0, j1, acc):
    f(vc, hk, s, h0, ng, base, j0, j1, acc)


@pytest.mark.skipif(not sa.AVAILABLE, reason="no AVX2/FMA")
@pytest.mark.parametrize("dh", [8, 16, 36, 64, 96, 128, 136])
def test_vector_blocks_match_portable(dh):
    rng = np.random.default_rng(dh)
    C, Hkv, H = 80, 2, 6
    kc = _halves(rng, (C, Hkv, dh), 3.0)
    vc = _halves(rng, (C, Hkv, dh), 1.0)
    qv = _halves(rng, (H, dh), 3.0)
    d32 = dh & ~31
    for h0, ng, j0, nblk, jmax in [(0, 3, 0, 10, 79), (3, 2, 8, 3, 30), (4, 1, 72, 1, 75)]:
        got = np.full((H, 88), np.nan, np.float32)
        want = got.copy()
        _scores(sa.qk_heads_simd, kc, 1, qv, h0, ng, d32, got, j0, nblk, jmax, vc)
        _scores(sa.qk_heads_portable, kc, 1, qv, h0, ng, d32, want, j0, nblk, jmax, vc)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    w = _halves(rng, (H, 88), 0.1)
    for h0, ng, base, j0, j1 in [(0, 3, 0, 0, 80), (3, 3, 8, 13, 77), (1, 1, 0, 5, 5)]:
        got = np.full((H, 4, 8, dh), np.nan, np.float32)
        want = got.copy()
        _slots(sa.wv32_simd, vc, 0, w, h0, ng, base, j0, j1, got)
        _slots(sa.wv32_portable, vc, 0, w, h0, ng, base, j0, j1, want)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
