"""kernels/attn/llm_fused.py against the op chains they replace (ops/llm.py), bit for bit,
and f16_round against fp16.round_to_f16 (and numpy's float16 rounding)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxexec.kernels.attn.attention import ggml_n_kv
from onnxexec.kernels.attn.llm_fused import (
    ATTEND_ONE,
    f16_round,
    norm_quant,
    rope_store_one,
    swiglu_quant,
)
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.fp16 import round_to_f16
from onnxexec.ops.llm import gated_act, kv_attention_op, rms_norm, rope


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def test_f16_round_matches_round_to_f16():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array(
        [
            0.0,
            -0.0,
            65504.0,
            65519.996,
            65520.0,
            -65520.0,
            2.0**-14,
            2.0**-14 * 0.99999,
            2.0**-24,
            2.0**-25,
            2.0**-25 * 1.0001,
            1.0 + 2.0**-11,
            1.0 + 3 * 2.0**-11,
            np.inf,
            -np.inf,
        ],
        np.float32,
    )
    xs = np.concatenate([bits.view(np.float32), edges])
    for x in xs:
        a, b = f16_round(np.float32(x)), round_to_f16(np.float32(x))
        assert (math.isnan(a) and math.isnan(b)) or _bits(a) == _bits(b), x
    finite = edges[np.isfinite(edges) & (edges != 0)]
    with np.errstate(over="ignore"):
        want = finite.astype(np.float16).astype(np.float32)
    got = np.array([f16_round(np.float32(x)) for x in finite], np.float32)
    np.testing.assert_array_equal(got, want)


def test_norm_quant_matches_rmsnorm_then_quantize():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 256)) * 3).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    h = np.empty_like(x)
    xq, xst = norm_quant(x, w, np.float32(1e-5), h)
    ref = rms_norm(x, w, epsilon=1e-5)
    np.testing.assert_array_equal(_bits(h), _bits(ref))
    rq, rst = quantize_act(ref)
    np.testing.assert_array_equal(xq, rq)
    np.testing.assert_array_equal(xst, rst)


def test_swiglu_quant_matches_gated_act():
    rng = np.random.default_rng(2)
    g = (rng.standard_normal((2, 96)) * 4).astype(np.float32)
    u = rng.standard_normal((2, 96)).astype(np.float32)
    f = np.empty_like(g)
    xq, _ = swiglu_quant(g, u, f)
    ref = gated_act(g, u, act="silu_ggml")
    np.testing.assert_array_equal(_bits(f), _bits(ref))
    np.testing.assert_array_equal(xq, quantize_act(ref)[0])


CASES = [  # H, Hkv, Dh, n_ctx, pos, style, window, softcap, q_scale
    (9, 3, 64, 512, 130, "norm", 0, 0.0, 1.0),
    (4, 2, 64, 200, 196, "neox", 0, 0.0, 1.0),  # n_kv = 200: cells >= 192 leftovers
    (4, 4, 48, 64, 40, "norm", 8, 30.0, 0.5),  # Dh % 32 != 0, sliding window, softcap
    (2, 1, 16, 32, 0, "neox", 0, 0.0, 1.0),  # Dh < 32, first position
]


@pytest.mark.parametrize("par", [0, 1])
@pytest.mark.parametrize("case", CASES)
def test_rope_attend_one_matches_rope_and_kvattention(case, par):
    H, Hkv, Dh, C, pos, style, window, softcap, q_scale = case
    rng = np.random.default_rng(pos + Dh)
    kc = (rng.standard_normal((C, Hkv, Dh)) * 2).astype(np.float16).astype(np.float32)
    vc = rng.standard_normal((C, Hkv, Dh)).astype(np.float16).astype(np.float32)
    qkv = (rng.standard_normal((1, (H + 2 * Hkv) * Dh)) * 2).astype(np.float32)
    q, k, v = np.split(qkv, [H * Dh, (H + Hkv) * Dh], axis=1)
    rope_kw = dict(head_dim=Dh, n_dims=Dh, base=10000.0, freq_scale=1.0, style=style)
    kc_ref, vc_ref = kc.copy(), vc.copy()
    p = np.asarray(pos, np.int64)
    ref = kv_attention_op(
        rope(q, p, **rope_kw),
        rope(k, p, **rope_kw),
        v,
        kc_ref,
        vc_ref,
        p,
        head_dim=Dh,
        q_scale=q_scale,
        window=window,
        softcap=softcap,
        kv_f16=1,
    )
    qr = np.empty(H * Dh, np.float32)
    rope_store_one(
        qkv,
        0,
        H * Dh,
        (H + Hkv) * Dh,
        kc,
        vc,
        pos,
        Dh,
        Dh,
        np.float32(10000.0),
        np.float32(1.0),
        style == "neox",
        qr,
    )
    np.testing.assert_array_equal(_bits(kc), _bits(kc_ref))
    np.testing.assert_array_equal(_bits(vc), _bits(vc_ref))
    a = np.empty((1, H * Dh), np.float32)
    ATTEND_ONE[1 - par](
        qr,
        kc,
        vc,
        pos,
        np.float32(q_scale),
        np.float32(1 / math.sqrt(Dh)),
        window,
        np.float32(softcap),
        ggml_n_kv(pos, 1, C),
        a,
    )
    np.testing.assert_array_equal(_bits(a), _bits(ref))
