"""The staged one-token decoder ops (kernels/attn/llm_decode_mt.py): one parallel region
per op gives llm_decode's drivers' bits, one thread alone does every stage, and a
thread still in a finished job leaves the next one alone."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.attn import llm_decode as kd
from onnxexec.kernels.attn import llm_decode_mt as mt
from onnxexec.kernels.quant import qtypes as q
from onnxexec.ops import llm_decode as od
from tests.unit.ops.test_llm_decode import DH, HKV, _bits, _weight

D, F, H = 256, 512, 8  # 8 query heads over 2 KV heads: 4 per group


def _split(g: tuple, n: int = 16) -> tuple:
    """The group with n chunks per product stage (as for a big weight)."""
    return (*g[: kd.N_CHUNKS], n, True)


def _run(fn, *args):
    """fn as ops/llm_decode runs it (a new job, 2 threads), groups args[-2:]."""
    return od._staged(fn, *args[:-2], 2, *args[-2:])


def _ffn_state(types, rng):
    wg, wu = _weight(types[0], F, D, rng), _weight(types[0], F, D, rng)
    wd = _weight(types[1], D, F, rng)
    return 1e-5, _split(od.group((wg, wu))), _split(od.group((wd,))), F


def _attn_state(types, rng):
    wq = _weight(types[0], H * DH, D, rng)
    wk, wv = _weight(types[0], HKV * DH, D, rng), _weight(types[0], HKV * DH, D, rng)
    wo = _weight(types[1], D, H * DH, rng)
    cfg = (1e-5, DH, DH, 10000.0, 1.0, False, 1.0, 1.0 / np.sqrt(DH), 0, 0.0, 0)
    g_qkv, g_o = _split(od.group((wq, wk, wv))), _split(od.group((wo,)))
    return cfg, g_qkv, g_o, np.empty(H * DH, np.float32), np.empty((1, H * DH), np.float32)


@pytest.mark.parametrize("types", [(q.Q4_1, q.Q8_0), (q.Q4_K, q.Q6_K)])
def test_staged_ffn_equals_driver(types):
    rng = np.random.default_rng(3 + sum(types))
    st = _ffn_state(types, rng)
    nw = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    for step in range(20):
        x = rng.standard_normal((1, D)).astype(np.float32)
        want = kd.ffn_one(x, nw, *st).copy()
        eps, ggu, gd, f = st
        got = _run(mt.ffn_region, x, nw, eps, f, ggu, gd)
        np.testing.assert_array_equal(_bits(got), _bits(want), f"step {step}")


@pytest.mark.parametrize("types", [(q.Q4_1, q.Q4_1), (q.Q6_K, q.Q4_K)])
def test_staged_attention_equals_driver(types):
    rng = np.random.default_rng(30 + sum(types))
    st = _attn_state(types, rng)
    nw = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    n_ctx = 48
    kc, vc = np.zeros((n_ctx, HKV, DH), np.float32), np.zeros((n_ctx, HKV, DH), np.float32)
    kc_ref, vc_ref = kc.copy(), vc.copy()
    for pos in range(n_ctx):
        x = rng.standard_normal((1, D)).astype(np.float32)
        want = kd.attn_one(x, nw, kc_ref, vc_ref, pos, *st).copy()
        cfg, gqkv, go, qr, a = st
        got = _run(mt.attn_region, x, nw, kc, vc, pos, cfg, qr, a, gqkv, go)
        np.testing.assert_array_equal(_bits(kc), _bits(kc_ref), err_msg=f"pos {pos}")
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"pos {pos}")


def test_caller_alone_runs_every_stage_and_a_late_helper_does_nothing():
    rng = np.random.default_rng(11)
    st = _ffn_state((q.Q4_1, q.Q4_1), rng)
    nw = np.ones(D, np.float32)
    x = rng.standard_normal((1, D)).astype(np.float32)
    want = kd.ffn_one(x, nw, *st).copy()
    ctl = mt.control()
    mt.post(ctl, 7)
    got = mt.ffn_stages(x, nw, *st, ctl, 7, True)  # no helper ever comes
    np.testing.assert_array_equal(_bits(got), _bits(want))
    before = ctl.copy()
    assert mt.ffn_stages(x, nw, *st, ctl, 7, False) is x  # late for job 7: all taken
    mt.post(ctl, 8)
    assert mt.ffn_stages(x, nw, *st, ctl, 7, False) is x  # job 8 posted: 7 is stale
    stages = ctl[8:].reshape(mt.N_STAGES, 8)
    assert (stages[:, 0] == 8 << 20).all() and (stages[:, 1] == 0).all()  # left alone
    assert before[0] == 7 and ctl[0] == 8


def test_decode_ops_take_the_staged_path_on_two_threads(monkeypatch):
    rng = np.random.default_rng(12)
    k = 1024  # 1024 x 1024 and up: the products are worth splitting (g[PARALLEL])
    wg, wu, wd = (_weight(q.Q4_1, k, k, rng) for _ in range(3))
    nw = np.ones(k, np.float32)
    x = rng.standard_normal((1, k)).astype(np.float32)
    calls = []
    monkeypatch.setattr(od, "free_cores", lambda: True)
    monkeypatch.setattr(od.nb, "get_num_threads", lambda: 2)
    staged = od._staged
    monkeypatch.setattr(od, "_staged", lambda fn, *a: calls.append(fn) or staged(fn, *a))
    got = od.ffn_decode(x, nw, wg, wu, wd, 1e-5, "int8")
    assert calls == [mt.ffn_region]
    monkeypatch.setattr(od, "free_cores", lambda: False)  # contended: this thread only
    alone = od.ffn_decode(x, nw, wg, wu, wd, 1e-5, "int8")
    np.testing.assert_array_equal(_bits(alone), _bits(got))
    assert calls == [mt.ffn_region]
