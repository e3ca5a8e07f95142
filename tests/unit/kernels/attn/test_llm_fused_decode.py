"""The one-token (decode) paths of the fused decoder ops (ops/llm_fused.py: cached
weight groups, preallocated buffers, activations quantized into them) against the
unfused op chains of ops/llm.py, bit for bit, and the in-place quantizers of
kernels/attn/llm_fused.py against the allocating ones."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.attn.llm_fused import (
    norm_quant8,
    norm_quant_into,
    quant_into,
    swiglu_quant8,
    swiglu_quant_into,
)
from onnxexec.kernels.quant import qmatmul as qm
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act8
from onnxexec.kernels.quant.dequant import block_geometry
from onnxexec.kernels.quant.ggml_dot import simd_ok
from onnxexec.kernels.quant.ggml_dot_k import quantize_q8_k8
from onnxexec.ops.llm import gated_act, kv_attention_op, q_matmul, rms_norm, rope
from onnxexec.ops.llm_fused import attn_block, ffn_block, norm_qmatmul

D, F, H, HKV, DH = 256, 512, 4, 2, 64


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _raw(t: int, n: int, k: int, rng) -> np.ndarray:
    block, size = block_geometry(t)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    half = rng.integers(0x2000, 0x3000, raw.shape[0], dtype=np.uint16).view(np.uint8)
    for off in (0, 2, size - 2):  # the half scales of every block type used here
        raw[:, off : off + 2] = half.reshape(-1, 2)
    return raw.reshape(-1)


def _weight(t: int, n: int, k: int, rng) -> qm.QWeight:
    w = qm.prepare_weight(_raw(t, n, k, rng), t, (n, k))
    if w.layout != "raw" or not simd_ok(t, n):
        pytest.skip("no AVX2 kernel for GGUF bytes of this type here")
    return w


def _buffers(k: int) -> tuple:
    return (
        np.empty((1, k), np.int8),
        np.empty((1, 3, k // 32), np.float32),
        np.empty((1, k), np.int8),
        np.empty((1, k // 256), np.float32),
        np.empty((1, k // 16), np.int32),
    )


def _same(got: tuple, want: tuple) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_quantizers_into_buffers_equal_allocating_ones():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((1, 512)) * 3).astype(np.float32)
    x[0, :32] = 0.0  # an all-zero block
    b = _buffers(512)
    quant_into(x, True, True, *b)
    _same(b[:2], quantize_act8(x))
    _same(b[2:], quantize_q8_k8(x, 0))
    w = rng.standard_normal(512).astype(np.float32)
    h, h_ref = np.empty_like(x), np.empty_like(x)
    norm_quant_into(x, w, np.float32(1e-5), h, True, False, *b)
    _same((h, *b[:2]), (h_ref, *norm_quant8(x, w, np.float32(1e-5), h_ref)))
    g, u = x[:, :256], x[:, 256:]
    f, f_ref = np.empty_like(g), np.empty_like(g)
    b = _buffers(256)
    swiglu_quant_into(g, u, f, True, True, *b)
    _same((f, *b[:2]), (f_ref, *swiglu_quant8(g, u, f_ref)))
    _same(b[2:], quantize_q8_k8(f_ref, 0))


# (Q|K|V type, out type, gate|up type, down type): block types, K-quants, a mix
MIXES = [
    (q.Q4_1, q.Q4_1, q.Q4_1, q.Q4_1),
    (q.Q8_0, q.Q5_0, q.Q4_1, q.Q8_0),
    (q.Q4_K, q.Q6_K, q.Q4_K, q.Q6_K),
    (q.Q6_K, q.Q4_K, q.Q8_0, q.Q5_0),
]


@pytest.mark.parametrize("types", MIXES)
def test_decode_ffn_and_head_equal_op_chain(types):
    rng = np.random.default_rng(sum(types))
    wg, wu = _weight(types[2], F, D, rng), _weight(types[2], F, D, rng)
    wd = _weight(types[3], D, F, rng)
    nw = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    for step in range(3):  # later steps reuse the cached group and its buffers
        x = rng.standard_normal((1, D)).astype(np.float32)
        got = ffn_block(x, nw, wg, wu, wd, epsilon=1e-5, act="silu_ggml", mode="int8")
        h = rms_norm(x, nw, epsilon=1e-5)
        gu = gated_act(q_matmul(h, wg, mode="int8"), q_matmul(h, wu, mode="int8"), act="silu_ggml")
        want = x + q_matmul(gu, wd, mode="int8")
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"step {step}")
        logits = norm_qmatmul(x, nw, wg, epsilon=1e-5, mode="int8")
        again = norm_qmatmul(x, nw, wg, epsilon=1e-5, mode="int8")
        assert logits is not again  # the logits leave the op: never a reused buffer
        np.testing.assert_array_equal(_bits(logits), _bits(q_matmul(h, wg, mode="int8")))


@pytest.mark.parametrize("types", MIXES)
def test_decode_attention_equals_op_chain(types):
    rng = np.random.default_rng(10 + sum(types))
    wq = _weight(types[0], H * DH, D, rng)
    wk, wv = _weight(types[0], HKV * DH, D, rng), _weight(types[0], HKV * DH, D, rng)
    wo = _weight(types[1], D, H * DH, rng)
    nw = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    n_ctx = 16
    kc, vc = np.zeros((n_ctx, HKV, DH), np.float32), np.zeros((n_ctx, HKV, DH), np.float32)
    kc_ref, vc_ref = kc.copy(), vc.copy()
    kw = dict(head_dim=DH, n_dims=DH, base=10000.0, freq_scale=1.0, style="neox")
    for pos in range(5):  # one token per step, as decoding
        x = rng.standard_normal((1, D)).astype(np.float32)
        p = np.asarray(pos, np.int64)
        got = attn_block(
            x, nw, wq, wk, wv, wo, kc, vc, p, epsilon=1e-5, kv_f16=1, mode="int8", **kw
        )
        h = rms_norm(x, nw, epsilon=1e-5)
        qv, kv, vv = (q_matmul(h, w, mode="int8") for w in (wq, wk, wv))
        a = kv_attention_op(
            rope(qv, p, **kw), rope(kv, p, **kw), vv, kc_ref, vc_ref, p, head_dim=DH, kv_f16=1
        )
        want = x + q_matmul(a, wo, mode="int8")
        np.testing.assert_array_equal(_bits(kc), _bits(kc_ref), err_msg=f"pos {pos}")
        np.testing.assert_array_equal(_bits(vc), _bits(vc_ref), err_msg=f"pos {pos}")
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"pos {pos}")
