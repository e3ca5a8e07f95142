"""com.microsoft GroupQueryAttention against onnxruntime's CPU kernel: first prompt
(padded or not), decoding and chunked prefill over a past KV cache, packed QKV,
rotary (halves / interleaved, positions from seqlens_k or position_ids), local window,
softcap, smooth softmax, head sinks, attention bias, fp16. onnxruntime's CPU kernel
wants head_size % 16 == 0 for rotary and batch 1 for a multi-token step over a past
cache, so the cases keep to those."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._ort_node import assert_like_ort

R = np.random.default_rng(4)
B, S, NQ, NKV, H, P = 2, 4, 4, 2, 16, 6


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def _prompt(lens=(S, S)):
    q, k, v = f32(B, S, NQ * H), f32(B, S, NKV * H), f32(B, S, NKV * H)
    return [q, k, v, None, None, i32(*(n - 1 for n in lens)), i32(S)]


def _decode():
    step = [f32(B, 1, NQ * H), f32(B, 1, NKV * H), f32(B, 1, NKV * H)]
    return [*step, f32(B, NKV, P, H), f32(B, NKV, P, H), i32(P, P - 2), i32(P + 1)]


def _chunk():
    step = [f32(1, S, NQ * H), f32(1, S, NKV * H), f32(1, S, NKV * H)]
    return [*step, f32(1, NKV, P, H), f32(1, NKV, P, H), i32(P + S - 1), i32(P + S)]


def _rotary(args, position_ids=None):
    out = [*args, f32(32, H // 2), f32(32, H // 2)]
    return out if position_ids is None else [*out, np.asarray(position_ids, np.int64)]


CASES = {
    "prompt": (_prompt, {}),
    "prompt_padded": (lambda: _prompt((S, S - 2)), {}),
    "decode": (_decode, {}),
    "chunk": (_chunk, {}),
    "packed": (
        lambda: [np.concatenate(_prompt()[:3], axis=-1), None, None, *_prompt()[3:]],
        {},
    ),
    "rotary_prompt": (lambda: _rotary(_prompt()), {"do_rotary": 1}),
    "rotary_prompt_padded": (lambda: _rotary(_prompt((S, S - 2))), {"do_rotary": 1}),
    "rotary_decode": (lambda: _rotary(_decode()), {"do_rotary": 1}),
    "rotary_interleaved_chunk": (
        lambda: _rotary(_chunk()),
        {"do_rotary": 1, "rotary_interleaved": 1},
    ),
    # the first prompt takes position_ids' first entry as every row's offset
    "rotary_position_ids_prompt": (
        lambda: _rotary(_prompt(), [[3, 5, 7, 9], [0, 1, 2, 3]]),
        {"do_rotary": 1},
    ),
    "rotary_position_ids_decode": (lambda: _rotary(_decode(), [[9], [2]]), {"do_rotary": 1}),
    "local_window_chunk": (_chunk, {"local_window_size": 3}),
    "local_window_decode": (_decode, {"local_window_size": 3}),
    "softcap_scale": (_prompt, {"softcap": 2.0, "scale": 0.5}),
    "smooth_softmax_prompt": (_prompt, {"smooth_softmax": 1}),
    "smooth_softmax_decode": (_decode, {"smooth_softmax": 1}),
    "head_sink_prompt": (lambda: [*_prompt(), None, None, None, None, f32(NQ)], {}),
    "head_sink_decode": (lambda: [*_decode(), None, None, None, None, f32(NQ) * 3], {}),
    "attention_bias_prompt": (lambda: [*_prompt(), None, None, None, f32(B, NQ, S, S)], {}),
    "attention_bias_broadcast": (lambda: [*_prompt(), None, None, None, f32(1, 1, S, S)], {}),
    "attention_bias_decode": (lambda: [*_decode(), None, None, None, f32(B, NQ, 1, P + 1)], {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_group_query_attention(case):
    make, attrs = CASES[case]
    assert_like_ort("GroupQueryAttention", make(), 3, num_heads=NQ, kv_num_heads=NKV, **attrs)


def test_group_query_attention_fp16():
    args = [a if a is None or a.dtype != np.float32 else a.astype(np.float16) for a in _decode()]
    assert_like_ort(
        "GroupQueryAttention", args, 3, num_heads=NQ, kv_num_heads=NKV, rtol=3e-3, atol=3e-3
    )
