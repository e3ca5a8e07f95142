"""The one-call-per-op decode path (ops/llm_decode.py, kernels/attn/llm_decode.py): taken
when every weight has an AVX2 kernel, bit for bit the unfused op chains of ops/llm.py,
fresh outputs, the fallback when it does not apply, and the drivers' cache stamp."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.attn import llm_decode as kd
from onnxexec.kernels.quant import qmatmul as qm
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.dequant import block_geometry
from onnxexec.kernels.quant.ggml_dot import simd_ok
from onnxexec.ops import llm_decode as od
from onnxexec.ops.llm import gated_act, kv_attention_op, q_matmul, rms_norm, rope
from onnxexec.ops.llm_fused import attn_block, ffn_block, norm_qmatmul

D, F, H, HKV, DH = 256, 512, 4, 2, 64


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _weight(t: int, n: int, k: int, rng) -> qm.QWeight:
    """A (n, k) weight of GGUF type t from random bytes with sane half scales."""
    block, size = block_geometry(t)
    raw = rng.integers(0, 256, (n * k // block, size), dtype=np.uint8)
    half = rng.integers(0x2000, 0x3000, raw.shape[0], dtype=np.uint16).view(np.uint8)
    for off in (0, 2, size - 2):
        raw[:, off : off + 2] = half.reshape(-1, 2)
    w = qm.prepare_weight(raw.reshape(-1), t, (n, k))
    if w.layout != "raw" or not simd_ok(t, n):
        pytest.skip("no AVX2 kernel for GGUF bytes of this type here")
    return w


def _ffn_ref(x, nw, wg, wu, wd):
    h = rms_norm(x, nw, epsilon=1e-5)
    gu = gated_act(q_matmul(h, wg, mode="int8"), q_matmul(h, wu, mode="int8"), act="silu_ggml")
    return x + q_matmul(gu, wd, mode="int8")


@pytest.mark.parametrize("types", [(q.Q4_1, q.Q4_1), (q.Q4_K, q.Q6_K), (q.Q8_0, q.Q4_K)])
def test_ffn_and_head_take_one_call_and_equal_op_chain(types):
    rng = np.random.default_rng(1 + sum(types))
    wg, wu, wd = (
        _weight(types[0], F, D, rng),
        _weight(types[0], F, D, rng),
        _weight(types[1], D, F, rng),
    )
    nw = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    outs = []
    for step in range(3):
        x = rng.standard_normal((1, D)).astype(np.float32)
        got = od.ffn_decode(x, nw, wg, wu, wd, 1e-5, "int8")
        assert got is not None  # the fast path applies: all weights have AVX2 kernels
        np.testing.assert_array_equal(_bits(got), _bits(_ffn_ref(x, nw, wg, wu, wd)), f"{step}")
        same = ffn_block(x, nw, wg, wu, wd, epsilon=1e-5, act="silu_ggml", mode="int8")
        np.testing.assert_array_equal(_bits(same), _bits(got))
        outs.append(got)
        logits = od.norm_qmatmul_decode(x, nw, wg, 1e-5, "int8")
        h = rms_norm(x, nw, epsilon=1e-5)
        np.testing.assert_array_equal(_bits(logits), _bits(q_matmul(h, wg, mode="int8")))
        assert logits is not norm_qmatmul(x, nw, wg, epsilon=1e-5, mode="int8")
    # outputs are new arrays, never the group's reused buffers
    assert len({id(o) for o in outs}) == 3
    assert not any(np.shares_memory(outs[0], o) for o in outs[1:])


def test_no_fast_path_without_avx2_weights():
    rng = np.random.default_rng(5)
    wg = rng.standard_normal((F, D)).astype(np.float32)  # a float matrix: general path
    wu = rng.standard_normal((F, D)).astype(np.float32)
    wd = rng.standard_normal((D, F)).astype(np.float32)
    x = rng.standard_normal((1, D)).astype(np.float32)
    nw = np.ones(D, np.float32)
    assert od.ffn_decode(x, nw, wg, wu, wd, 1e-5, "int8") is None
    assert od.norm_qmatmul_decode(x, nw, wg, 1e-5, "int8") is None
    qw = _weight(q.Q4_1, F, D, rng)
    assert od.ffn_decode(x, nw, qw, qw, wd, 1e-5, "int8") is None  # one group not AVX2
    assert od.ffn_decode(x, nw, qw, qw, _weight(q.Q4_1, D, F, rng), 1e-5, "float") is None


@pytest.mark.parametrize("types", [(q.Q4_1, q.Q4_1), (q.Q6_K, q.Q4_K)])
def test_attention_one_call_equals_op_chain(types):
    rng = np.random.default_rng(20 + sum(types))
    wq = _weight(types[0], H * DH, D, rng)
    wk, wv = _weight(types[0], HKV * DH, D, rng), _weight(types[0], HKV * DH, D, rng)
    wo = _weight(types[1], D, H * DH, rng)
    nw = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    n_ctx = 12
    kc, vc = np.zeros((n_ctx, HKV, DH), np.float32), np.zeros((n_ctx, HKV, DH), np.float32)
    kc_ref, vc_ref = kc.copy(), vc.copy()
    kw = dict(head_dim=DH, n_dims=DH, base=10000.0, freq_scale=1.0, style="norm")
    attrs = ("int8", 1e-5, DH, DH, 10000.0, 1.0, False, 1.0, 0.0, 0, 0.0)
    for pos in range(4):
        x = rng.standard_normal((1, D)).astype(np.float32)
        p = np.asarray(pos, np.int64)
        got = od.attn_decode(x, nw, wq, wk, wv, wo, kc, vc, pos, attrs)
        assert got is not None
        h = rms_norm(x, nw, epsilon=1e-5)
        qv, kv, vv = (q_matmul(h, w, mode="int8") for w in (wq, wk, wv))
        a = kv_attention_op(
            rope(qv, p, **kw), rope(kv, p, **kw), vv, kc_ref, vc_ref, p, head_dim=DH, kv_f16=1
        )
        want = x + q_matmul(a, wo, mode="int8")
        np.testing.assert_array_equal(_bits(kc), _bits(kc_ref), err_msg=f"pos {pos}")
        np.testing.assert_array_equal(_bits(vc), _bits(vc_ref), err_msg=f"pos {pos}")
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"pos {pos}")
    # a non-contiguous cache can't be written in place by the kernel: general path
    kt = np.zeros((HKV, n_ctx, DH), np.float32).transpose(1, 0, 2)
    x = rng.standard_normal((1, D)).astype(np.float32)
    assert od.attn_decode(x, nw, wq, wk, wv, wo, kt, vc, 5, attrs) is None
    y = attn_block(x, nw, wq, wk, wv, wo, kt, vc.copy(), np.asarray(5), kv_f16=1, mode="int8", **kw)
    assert y.shape == (1, D)


def test_parallel_products_from_the_serial_driver_equal_serial_ones():
    rng = np.random.default_rng(7)
    k = 1024  # 1024 x 1024 reaches lanes.PAR_MIN_MACS: pick() takes the parallel twin
    w = _weight(q.Q4_1, 1024, k, rng)
    g = od.group((w,))
    x = rng.standard_normal((1, k)).astype(np.float32)
    nw = np.ones(k, np.float32)
    par = kd.norm_dot_one(x, nw, 1e-5, g)
    serial = (*g[: kd.N_CHUNKS], 1, False)
    assert g[kd.PARALLEL] and g[kd.N_CHUNKS] > 1
    np.testing.assert_array_equal(_bits(par), _bits(kd.norm_dot_one(x, nw, 1e-5, serial)))
    h = rms_norm(x, nw, epsilon=1e-5)
    np.testing.assert_array_equal(_bits(par), _bits(q_matmul(h, w, mode="int8")))


def test_driver_cache_stamp_covers_imported_kernel_sources(tmp_path):
    kernels = tmp_path / "kernels"
    (kernels / "sub").mkdir(parents=True)
    (tmp_path / "native").mkdir()
    (kernels / "top.py").write_text(
        "from onnxexec.kernels.a import f\nfrom onnxexec.kernels import (\n    b,\n    c as d,\n)\n"
        "from onnxexec.kernels.sub import g\nfrom onnxexec.kernels.sub.h import k\n"
        "from onnxexec.native.pool import run\n"
    )
    files = {n: kernels / f"{n}.py" for n in "abce"}
    files |= {f"sub.{n}": kernels / "sub" / f"{n}.py" for n in "ghi"}
    files["native.pool"] = tmp_path / "native" / "pool.py"
    for path in files.values():
        path.write_text("x = 1\n")
    before = kd.kernel_sources_hash("top", str(kernels))
    # e.py and sub/i.py are not imported
    for name, path in files.items():
        path.write_text("x = 2\n")
        after = kd.kernel_sources_hash("top", str(kernels))
        assert (after != before) == (name not in ("e", "sub.i")), name
        before = after
    # the drivers' cache entries carry it (as of import: the tree may change since),
    # or, when kernels/objload/numba_cache.py re-made their caches, numba's cache folder
    # is the module's own, named by the digest of the same import closure
    cache = kd.attn_one._cache
    stamp = cache._cache_file._source_stamp
    if isinstance(stamp, tuple):
        assert len(stamp[1]) == 32
    else:
        from onnxexec.kernels.objload import numba_cache

        folder = numba_cache.folder_for("onnxexec.kernels.attn.llm_decode")
        assert cache._cache_path.startswith(folder), (cache._cache_path, folder)


def test_a_nodes_state_is_made_once_and_only_for_its_weights():
    """The prepare hook's DecodeState keeps the gathered groups of the node's planned
    weights across tokens; other weights get their own (same results either way)."""
    rng = np.random.default_rng(11)
    wg, wu = _weight(q.Q4_1, F, D, rng), _weight(q.Q4_1, F, D, rng)
    wd = _weight(q.Q4_1, D, F, rng)
    nw = np.ones(D, np.float32)
    st = od.prepare_decode(2, 3)((None, nw, wg, wu, wd), {})
    assert st.made is None  # nothing gathered at planning time
    x = rng.standard_normal((1, D)).astype(np.float32)
    first = od.ffn_decode(x, nw, wg, wu, wd, 1e-5, "int8", st)
    made = st.made
    assert made
    again = od.ffn_decode(x, nw, wg, wu, wd, 1e-5, "int8", st)
    assert st.made is made
    np.testing.assert_array_equal(_bits(first), _bits(again))
    other = od.ffn_decode(x, nw, wu, wg, wd, 1e-5, "int8", st)  # not the planned weights
    assert st.made is made
    np.testing.assert_array_equal(_bits(other), _bits(_ffn_ref(x, nw, wu, wg, wd)))
