"""Prompt (T >= 2) attention on ggml's F16-cache path and the vectorized ggml_math helpers
it uses, bit for bit against numpy references written from llama.cpp's summation orders
(tinyBLAS lanes, ggml_vec_soft_max_f32 chunks) and against the per-row kernel."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from onnxexec.kernels.attn import attention as at
from onnxexec.kernels.math import ggml_math as gm
from onnxexec.kernels.quant.fp16 import round_to_f16
from tests.unit.kernels._ggml_ref import hsum8

RNG = np.random.default_rng(11)


def half(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def expf_ref(x: np.ndarray) -> np.ndarray:
    """ggml_v_expf element by element (gm.expf is checked against exp in test_ggml_math)."""
    return np.array([gm.expf(np.float32(v)) for v in x.ravel()], np.float32).reshape(x.shape)


def attend_ref(q, kc, vc, pos, scale, window=0, softcap=0.0):
    """llama.cpp's F16-KV attention for T >= 2 (module docstring of kernels/attn/attention.py):
    tinyBLAS lane sums for both products, 8-cell softmax chunks from cell 0."""
    T, HD = q.shape
    _, Hkv, Dh = kc.shape
    H = HD // Dh
    out = np.zeros((T, HD), np.float32)
    qh = half(q).reshape(T, H, Dh)
    for t in range(T):
        p = pos + t
        lo = max(0, p - window + 1) if window else 0
        for h in range(H):
            hk = h // (H // Hkv)
            k = kc[lo : p + 1, hk]
            lanes = np.zeros((p + 1 - lo, 8), np.float32)
            for d0 in range(0, Dh, 8):
                lanes = (lanes + k[:, d0 : d0 + 8] * qh[t, h, d0 : d0 + 8]).astype(np.float32)
            s = hsum8(lanes)
            if softcap:
                s = (softcap * np.tanh(s * np.float32(1.0 / softcap))).astype(np.float32)
            s = (s * np.float32(scale)).astype(np.float32)
            e = np.zeros((p + 8) // 8 * 8, np.float32)
            e[lo : p + 1] = expf_ref((s - s.max()).astype(np.float32))
            total = 0.0
            for c in hsum8(e.reshape(-1, 8)):
                total += float(c)
            w = half(e * np.float32(1.0 / total))
            acc = np.zeros((8, Dh), np.float32)
            for j in range(lo, p + 1):
                acc[j & 7] = (acc[j & 7] + vc[j, hk] * w[j]).astype(np.float32)
            out[t, h * Dh : (h + 1) * Dh] = hsum8(acc.T)
    return out


def caches(C, Hkv, Dh, spread=2.0):
    kc = half(RNG.standard_normal((C, Hkv, Dh)) * spread)
    vc = half(RNG.standard_normal((C, Hkv, Dh)))
    return kc, vc


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize(
    ("T", "pos", "H", "Hkv", "Dh", "window", "softcap"),
    [
        (2, 0, 2, 2, 8, 0, 0.0),
        (19, 0, 4, 2, 16, 0, 0.0),  # rows not a multiple of the row block
        (7, 5, 6, 2, 8, 0, 0.0),  # prompt after cached positions
        (12, 3, 4, 1, 24, 5, 0.0),  # sliding window, cells before lo skipped
        (9, 2, 4, 4, 16, 0, 4.0),  # soft-capped scores
    ],
)
def test_prompt_kernel_matches_reference(T, pos, H, Hkv, Dh, window, softcap):
    kc, vc = caches(48, Hkv, Dh)
    q = RNG.standard_normal((T, H * Dh)).astype(np.float32)
    got = at.kv_attention(q, kc, vc, pos, 0.3, window, softcap, ggml=True)
    assert same_bits(got, attend_ref(q, kc, vc, pos, 0.3, window, softcap))


@pytest.mark.parametrize(
    ("T", "pos", "H", "Hkv", "Dh", "C", "window"),
    [
        (128, 0, 9, 3, 64, 512, 0),  # SmolLM2-135M prompt
        (40, 100, 8, 2, 128, 256, 0),
        (33, 17, 4, 2, 64, 64, 20),  # n_kv capped at the cache
    ],
)
def test_prompt_kernel_equals_row_kernel(T, pos, H, Hkv, Dh, C, window):
    """The per-(row, head) kernel sums in the same order; every thread split agrees."""
    kc, vc = caches(C, Hkv, Dh, spread=3.0)
    q = RNG.standard_normal((T, H * Dh)).astype(np.float32) * 2
    want = np.empty_like(q)
    n_kv = at.ggml_n_kv(pos, T, C)
    at._ATTEND_GGML[1](q, kc, vc, pos, np.float32(0.125), window, np.float32(0.0), n_kv, want)
    assert same_bits(at.kv_attention(q, kc, vc, pos, 0.125, window, ggml=True), want)
    kt = at._k_transposed(kc, pos + T)
    n_items = H * -(-T // at.PROMPT_ROWS)
    args = (q, kt, vc, pos, np.float32(0.125), window, np.float32(0.0), at.PROMPT_ROWS)
    for cuts in ([0, n_items], [0, 1, n_items // 2, n_items], list(range(n_items + 1))):
        out = np.full_like(q, np.nan)
        for i0, i1 in itertools.pairwise(cuts):
            at._attend_prompt(*args, i0, i1, out)
        assert same_bits(out, want)


def test_prompt_kernel_extreme_scores_underflow_to_zero():
    """Score gaps beyond float32 exp range: expf_vec's rare path (2^n not normal)."""
    Hkv, Dh = 1, 8
    kc, vc = caches(16, Hkv, Dh)
    kc[3] = 2000.0
    q = RNG.standard_normal((6, 2 * Dh)).astype(np.float32)
    q[:, :Dh] = 1.0
    got = at.kv_attention(q, kc, vc, 0, 1.0, ggml=True)
    assert same_bits(got, attend_ref(q, kc, vc, 0, 1.0))
    np.testing.assert_array_equal(got[3:, :Dh], vc[3, 0][None].repeat(3, 0))


def test_f16_round_is_nearest_half():
    bits = RNG.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate(
        [
            bits.view(np.float32),
            RNG.standard_normal(50_000).astype(np.float32) * np.float32(1e-6),
            np.array(
                [0.0, -0.0, 65504, 65519.99, 65520, -7e4, 2**-14, 2**-25, 3 * 2**-25, 1e-45],
                np.float32,
            ),
        ]
    )
    x = x[np.isfinite(x)]
    got = np.array([gm.f16_round(v) for v in x], np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    want[want == 0] = np.abs(want[want == 0]) * np.sign(x[want == 0])  # -0 only for x < 0
    assert same_bits(got, want)
    assert same_bits(got, np.array([round_to_f16(v) for v in x], np.float32))
    inf = np.array([np.inf, -np.inf], np.float32)
    assert same_bits(np.array([gm.f16_round(v) for v in inf], np.float32), inf)


def test_expf_vec_equals_expf():
    x = np.concatenate(
        [
            RNG.uniform(-110, 95, 20_000),
            RNG.uniform(-1, 1, 1000),
            [0.0, -0.0, np.inf, -np.inf, np.nan, -87.3, -87.4, -88.0, 88.7, 89.0, -103.9],
        ]
    ).astype(np.float32)
    got = np.empty_like(x)
    gm.expf_vec(x, got)
    want = expf_ref(x)
    ok = ~np.isnan(want)
    assert same_bits(got[ok], want[ok]) and np.isnan(got[~ok]).all()


@pytest.mark.parametrize("shape", [(1, 37), (128, 1536), (3, 2049)])
def test_silu_mul_bits(shape):
    x = (RNG.standard_normal(shape) * 6).astype(np.float32)
    g = RNG.standard_normal(shape).astype(np.float32)
    x.flat[:3] = [-100.0, 95.0, 0.0]
    want = (x / (np.float32(1.0) + expf_ref(-x))).astype(np.float32) * g
    assert same_bits(gm.silu_mul(x, g), want)
