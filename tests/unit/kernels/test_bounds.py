"""Native kernels checked at the boundary (kernels/bounds.py and the wrappers' own
checks): issue 20's reproducers (Conv / MaxPool with negative pads corrupted the heap,
a Conv bias shorter than the output channels was read past its end on every conv
path) as regression tests, every conv path reading its input, bias and residual
between guard pages against a float64 numpy conv, and a table of bad arguments for
each native entry point that must end in a ValueError, run in a subprocess under
glibc's malloc checks so that a crash or heap corruption fails the test instead of
the test run."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from onnxexec.kernels import isa
from onnxexec.kernels.conv import conv2d as conv2d_mod
from onnxexec.kernels.conv import direct_job
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_taps import to_ohwi
from onnxexec.kernels.conv.pool2d import avg_pool2d, max_pool2d
from onnxexec.native import parallel
from tests.unit.kernels._guard import guarded
from tests.unit.kernels.conv.test_conv_taps import _reference

REPO = Path(__file__).resolve().parents[3]
PATHS = (
    "depthwise2d_fused", "conv_direct", "rows_conv", "conv_taps", "conv1x1_small",
    "pointwise", "_wide_gemm", "_im2col_gemm", "_im2col_native",
)  # fmt: skip

# x shape, w shape, strides, pads (t, l, b, r), group, weight stored OHWI
CONVS = [
    ((1, 32, 14, 14), (32, 1, 3, 3), (1, 1), (1, 1, 1, 1), 32, False),  # depthwise
    ((1, 16, 15, 13), (32, 1, 3, 3), (2, 2), (1, 1, 1, 1), 16, False),  # depthwise x2, s2
    ((1, 64, 20, 20), (96, 64, 3, 3), (1, 1), (1, 1, 1, 1), 1, True),  # direct KxK
    ((1, 3, 32, 32), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), 1, True),  # the 7x7 stem
    ((1, 64, 7, 7), (128, 64, 3, 3), (1, 1), (1, 1, 1, 1), 1, True),  # rows (few pixels)
    ((1, 128, 24, 24), (16, 128, 3, 3), (2, 2), (1, 1, 1, 1), 1, True),  # taps
    ((1, 128, 24, 24), (160, 128, 3, 3), (2, 2), (1, 1, 1, 1), 1, True),  # rows, strided
    ((1, 32, 18, 26), (48, 16, 3, 3), (1, 1), (1, 0, 2, 1), 2, True),  # grouped
    ((1, 160, 7, 7), (96, 160, 1, 1), (1, 1), (0, 0, 0, 0), 1, False),  # small 1x1
    ((1, 32, 30, 30), (24, 32, 1, 1), (1, 1), (0, 0, 0, 0), 1, False),  # pointwise
    ((1, 16, 21, 21), (24, 16, 1, 1), (2, 2), (0, 0, 0, 0), 1, False),  # strided 1x1
    ((1, 16, 20, 20), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), 1, False),  # wide im2col
    ((1, 16, 20, 20), (32, 16, 3, 3), (2, 2), (1, 1, 1, 1), 1, False),  # im2col rows
    ((1, 8, 64, 64), (16, 8, 3, 3), (2, 2), (0, 1, 1, 0), 1, False),  # im2col, native tiles
    ((1, 256, 4, 4), (256, 256, 3, 3), (1, 1), (2, 2, 2, 2), 1, False),  # im2col by channel
]


def _out_hw(xs, ws, s, p):
    return tuple((xs[2 + i] + p[i] + p[i + 2] - ws[2 + i]) // s[i] + 1 for i in range(2))


def _spy(monkeypatch):
    taken = set()
    for name in PATHS:
        real = getattr(conv2d_mod, name)

        def spy(*args, _real=real, _name=name, **kw):
            taken.add(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(conv2d_mod, name, spy)
    return taken


def test_every_conv_path_reads_only_its_own_buffers(monkeypatch):
    """Input, bias and residual each end where a page ends, before an inaccessible
    one: a read past any of them (the short-bias bug read bias[m] for m >= len) dies
    with SIGSEGV. Results against a float64 numpy conv. Also asserts which paths the
    table reached at this ISA level (ONNXEXEC_ISA), so it keeps covering them all."""
    old = parallel.num_threads()
    parallel.set_num_threads(2)
    taken = _spy(monkeypatch)
    try:
        for xs, ws, s, p, group, ohwi in CONVS:
            rng = np.random.default_rng(len(taken))
            w = rng.standard_normal(ws).astype(np.float32)
            w = to_ohwi(w) if ohwi else w
            oh, ow = _out_hw(xs, ws, s, p)
            with guarded(xs) as x, guarded((ws[0],)) as b, guarded((1, ws[0], oh, ow)) as z:
                got = conv2d(x, w, b, s, p[:2], (1, 1), group, (oh, ow), 0, 0.0, 0.0, z)
                want, _ = _reference(x, w, b, s, p, (1, 1), group)
            np.testing.assert_allclose(got, want + z, rtol=1e-4, atol=2e-4, err_msg=str(xs))
    finally:
        parallel.set_num_threads(old)
    want_paths = set(PATHS)
    if not direct_job.AVAILABLE:  # AVX-512 only: other paths take these convs
        want_paths -= {"conv_direct", "conv1x1_small"}
    assert taken == want_paths, f"ISA {isa.level()}: paths not reached {want_paths - taken}"


@pytest.mark.parametrize("xs,ws,s,p,group,ohwi", CONVS)
def test_short_or_long_bias_and_negative_pads_are_refused(xs, ws, s, p, group, ohwi):
    """issue 20's reproducers, on every path's shapes: refused before any kernel runs."""
    w = np.ones(ws, dtype=np.float32)
    w = to_ohwi(w) if ohwi else w
    x = np.ones(xs, dtype=np.float32)
    out_hw = _out_hw(xs, ws, s, p)
    for n in (0, 1, ws[0] - 1, ws[0] + 1):
        b = np.ones(n, dtype=np.float32)
        with pytest.raises(ValueError, match=f"bias has {n} values, expected {ws[0]}"):
            conv2d(x, w, b, s, p[:2], (1, 1), group, out_hw)
    with pytest.raises(ValueError, match="pads must be >= 0"):
        conv2d(x, w, None, s, (-1, p[1]), (1, 1), group, out_hw)
    with pytest.raises(ValueError, match="pads must be >= 0"):
        conv2d(x, w, None, s, (p[0], -2), (1, 1), group, out_hw)


def _pool_reference(x, k, s, pads, out_hw, fill):
    """Max (fill -inf) or sum (fill 0) of every window, float64, pads (t, l, b, r)."""
    xp = np.pad(
        x.astype(np.float64),
        ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
        constant_values=fill,
    )
    oh, ow = out_hw
    win = [
        xp[:, :, a : a + s[0] * (oh - 1) + 1 : s[0], c : c + s[1] * (ow - 1) + 1 : s[1]]
        for a in range(k[0])
        for c in range(k[1])
    ]
    return np.max(win, axis=0) if fill == -np.inf else np.sum(win, axis=0)


@pytest.mark.parametrize("threads", [1, 2])
def test_pools_read_only_their_input_and_refuse_negative_pads(threads):
    """The input between guard pages, pads up to the kernel size and beyond (windows
    wholly in the padding), against numpy; negative pads refused."""
    old = parallel.num_threads()
    parallel.set_num_threads(threads)
    try:
        for xs, k, s, pads in [
            ((2, 64, 17, 19), (3, 3), (2, 2), (1, 1, 1, 1)),
            ((1, 8, 9, 9), (2, 2), (1, 1), (2, 3, 3, 2)),
            ((1, 64, 33, 33), (3, 3), (1, 1), (0, 0, 0, 0)),
        ]:
            out_hw = _out_hw(xs, (0, 0, *k), s, pads)
            with guarded(xs) as x:
                got, _ = max_pool2d(x, k, s, (1, 1), pads[:2], out_hw)
                avg = avg_pool2d(x, k, s, (1, 1), pads[:2], pads[2:], out_hw, True)
                want = _pool_reference(x, k, s, pads, out_hw, -np.inf)
                want_avg = _pool_reference(x, k, s, pads, out_hw, 0.0) / (k[0] * k[1])
            np.testing.assert_array_equal(got, want.astype(np.float32))
            np.testing.assert_allclose(avg, want_avg, rtol=1e-5, atol=1e-6)
            with pytest.raises(ValueError, match="pads must be >= 0"):
                max_pool2d(x, k, s, (1, 1), (-1, 0), out_hw)
            with pytest.raises(ValueError, match="pads must be >= 0"):
                avg_pool2d(x, k, s, (1, 1), (0, -1), pads[2:], out_hw)
    finally:
        parallel.set_num_threads(old)


def test_zero_sizes():
    """Empty batches and outputs return empty arrays without running a kernel; an
    empty input that would have to make a non-empty output is refused."""
    w = np.ones((8, 4, 3, 3), dtype=np.float32)
    y = conv2d(np.ones((0, 4, 9, 9), np.float32), w, None, (1, 1), (1, 1), (1, 1), 1, (9, 9))
    assert y.shape == (0, 8, 9, 9)
    y = conv2d(np.ones((1, 4, 9, 9), np.float32), w[:0], None, (1, 1), (1, 1), (1, 1), 1, (9, 9))
    assert y.shape == (1, 0, 9, 9)
    with pytest.raises(ValueError, match="empty input"):
        conv2d(np.ones((1, 4, 0, 9), np.float32), w, None, (1, 1), (1, 1), (1, 1), 1, (1, 9))
    y, _ = max_pool2d(np.ones((0, 3, 5, 5), np.float32), (2, 2), (1, 1), (1, 1), (0, 0), (4, 4))
    assert y.shape == (0, 3, 4, 4)


# Each case: a name and a call that must raise ValueError. Run in one child process
# with MALLOC_CHECK_=3 (glibc aborts on a corrupted heap; since glibc 2.34 only with
# libc_malloc_debug preloaded) so that a kernel that does write out of bounds fails
# this test instead of killing pytest.
_TABLE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from onnxexec.native import parallel
    from onnxexec.kernels.conv.conv2d import conv2d
    from onnxexec.kernels.conv.depthwise import depthwise2d_fused
    from onnxexec.kernels.linalg.gemm import linear, linear_packed
    from onnxexec.kernels.attn.mha import attention
    from onnxexec.kernels.conv.pool2d import avg_pool2d, max_pool2d
    from onnxexec.kernels.quant import qtypes as qt
    from onnxexec.kernels.linalg import sgemm_packed
    from onnxexec.kernels.quant.actquant import quantize_act
    from onnxexec.kernels.attn.attention import kv_attention
    from onnxexec.kernels.quant.qmatmul import prepare_weight, qmatmul, qmatmul_q

    parallel.set_num_threads(2)
    f = lambda *s: np.ones(s, dtype=np.float32)
    x, w = f(1, 16, 12, 12), f(32, 16, 3, 3)
    wp = sgemm_packed.pack(f(64, 40)) if sgemm_packed.AVAILABLE else f(3, 64, 16)
    nr = wp.shape[2]
    q, kt, v = f(1, 4, 5, 8), f(1, 2, 8, 6), f(1, 2, 6, 8)
    one = (1, 1)


    def call(fn, defaults):
        return lambda **kw: fn(**{**defaults, **kw})


    conv = call(conv2d, dict(x=x, w=w, bias=None, strides=one, pads=one, dilations=one,
                             group=1, out_hw=(12, 12)))
    dw = call(depthwise2d_fused, dict(x=x, w=f(16, 1, 3, 3), bias=None, strides=one,
                                      pads_begin=one, dilations=one, out=f(1, 16, 12, 12)))
    maxp = call(max_pool2d, dict(x=x, kernel=(3, 3), strides=one, dilations=one,
                                 pads_begin=one, out_hw=(12, 12)))
    avgp = call(avg_pool2d, dict(x=x, kernel=(3, 3), strides=one, dilations=one,
                                 pads_begin=one, pads_end=one, out_hw=(12, 12)))
    lin = call(linear, dict(x=f(70, 64), w=f(64, 40)))
    pk = call(linear_packed, dict(x=f(70, 64), wp=wp, n=40))
    att = call(attention, dict(q=q, kt=kt, v=v, mask=None, scale=1.0, nan_to_zero=False))
    kva = call(kv_attention, dict(q=f(2, 16), k_cache=f(8, 2, 4), v_cache=f(8, 2, 4), pos=0,
                                  scale=1.0))
    q8 = np.zeros(64 * 2 * 34, np.uint8)  # (64, 64) Q8_0: 2 blocks of 2 + 32 bytes a row
    qw = prepare_weight(q8, qt.Q8_0, (64, 64))
    xq, xst = quantize_act(f(3, 64))


    def pool_job(spans):
        pool = parallel.native_pool()
        try:
            pool.run_native(parallel.KIND_POOL, spans)
        finally:
            pool.busy.release()
    CASES = {
        "conv negative top pad": lambda: conv(pads=(-1, 1)),
        "conv negative pad 1x1": lambda: conv(w=f(32, 16, 1, 1), pads=(0, -3), out_hw=(12, 18)),
        "conv short bias": lambda: conv(bias=f(31)),
        "conv long bias": lambda: conv(bias=f(33)),
        "conv residual shape": lambda: conv(z=f(1, 32, 12, 11)),
        "conv zero stride": lambda: conv(strides=(0, 1)),
        "conv negative stride": lambda: conv(strides=(1, -1)),
        "conv zero dilation": lambda: conv(dilations=(0, 1)),
        "conv negative output": lambda: conv(out_hw=(-1, 12)),
        "conv group mismatch": lambda: conv(group=3),
        "conv zero group": lambda: conv(group=0),
        "conv channels mismatch": lambda: conv(x=f(1, 8, 12, 12)),
        "conv 3-D input": lambda: conv(x=f(16, 12, 12)),
        "conv zero kernel": lambda: conv(w=f(32, 16, 0, 3)),
        "conv empty input": lambda: conv(x=f(1, 16, 0, 12), out_hw=(1, 12)),
        "conv one pad": lambda: conv(pads=(1,)),
        "depthwise negative pad": lambda: dw(pads_begin=(-1, -1)),
        "depthwise short bias": lambda: dw(bias=f(15)),
        "depthwise float64 out": lambda: dw(out=np.ones((1, 16, 12, 12))),
        "depthwise strided out": lambda: dw(out=f(1, 16, 12, 24)[..., ::2]),
        "depthwise float64 input": lambda: dw(x=np.ones((1, 16, 12, 12))),
        "depthwise other batch": lambda: dw(out=f(2, 16, 12, 12)),
        "depthwise residual shape": lambda: dw(z=f(1, 16, 12, 13)),
        "depthwise not depthwise": lambda: dw(w=f(16, 2, 3, 3)),
        "maxpool negative pad": lambda: maxp(pads_begin=(-2, -2)),
        "maxpool negative pad, indices": lambda: maxp(pads_begin=(-1, 0), want_indices=True),
        "maxpool zero kernel": lambda: maxp(kernel=(0, 3)),
        "maxpool zero stride": lambda: maxp(strides=(0, 1)),
        "maxpool 3-D input": lambda: maxp(x=f(16, 12, 12)),
        "avgpool negative pad": lambda: avgp(pads_begin=(-1, -1)),
        "avgpool negative end pad": lambda: avgp(pads_end=(-1, 0)),
        "linear short bias": lambda: lin(bias=f(39)),
        "linear activation columns": lambda: lin(act=1, act_cols=(0, 41)),
        "linear inner mismatch": lambda: lin(x=f(70, 63)),
        "linear 1-D weight": lambda: lin(w=f(64)),
        "packed short bias": lambda: pk(bias=f(39)),
        "packed N too big": lambda: pk(n=wp.shape[0] * nr + 1),
        "packed N too small": lambda: pk(n=(wp.shape[0] - 1) * nr),
        "packed float64 weight": lambda: pk(wp=wp.astype(np.float64)),
        "packed strided weight": lambda: pk(wp=np.repeat(wp, 2, axis=2)[..., ::2]),
        "packed activation columns": lambda: pk(act=1, act_cols=(-1, 40)),
        "attention kv heads": lambda: att(kt=f(1, 3, 8, 6), v=f(1, 3, 6, 8)),
        "attention zero kv heads": lambda: att(kt=f(1, 0, 8, 6), v=f(1, 0, 6, 8)),
        "attention head size": lambda: att(kt=f(1, 2, 7, 6)),
        "attention v length": lambda: att(v=f(1, 2, 5, 8)),
        "attention 3-D q": lambda: att(q=f(4, 5, 8)),
        "attention mask shape": lambda: att(mask=f(1, 1, 5, 7)),
        "kv_attention v cache": lambda: kva(v_cache=f(7, 2, 4)),
        "kv_attention past the cache": lambda: kva(pos=7),
        "kv_attention negative pos": lambda: kva(pos=-1),
        "kv_attention head width": lambda: kva(q=f(2, 10)),
        "kv_attention zero Dh": lambda: kva(k_cache=f(8, 2, 0), v_cache=f(8, 2, 0)),
        "kv_attention negative window": lambda: kva(window=-1),
        "kv_attention 1-D q": lambda: kva(q=f(16)),
        "qweight short bytes": lambda: prepare_weight(q8[:-1], qt.Q8_0, (64, 64)),
        "qmatmul columns": lambda: qmatmul(f(3, 63), qw),
        "qmatmul out shape": lambda: qmatmul(f(3, 64), qw, out=f(3, 63)),
        "qmatmul_q activations": lambda: qmatmul_q(xq[:, :32], xst, qw, f(3, 64)),
        "qmatmul_q scales": lambda: qmatmul_q(xq, xst[:2], qw, f(3, 64)),
        "qmatmul_q out": lambda: qmatmul_q(xq, xst, qw, f(2, 64)),
        "pool job, too many spans": lambda: pool_job(np.arange(parallel.MAX_SPANS + 2)),
        "pool job, no span": lambda: pool_job(np.zeros(1, np.int64)),
        "pool job, int32 spans": lambda: pool_job(np.arange(3, dtype=np.int32)),
    }
    for name, case in CASES.items():
        try:
            case()
            outcome = ["no error", ""]
        except ValueError as e:
            outcome = ["ValueError", str(e)]
        except BaseException as e:
            outcome = [type(e).__name__, str(e)]
        print(json.dumps([name, *outcome]), flush=True)
    """
)


def test_bad_arguments_to_every_entry_point_raise_value_error():
    env = {**os.environ, "MALLOC_CHECK_": "3", "MALLOC_PERTURB_": "165", "PYTHONPATH": str(REPO)}
    debug = ctypes.util.find_library("c_malloc_debug")  # glibc >= 2.34 moved the checks there
    if debug:
        env["LD_PRELOAD"] = " ".join(filter(None, (debug, os.environ.get("LD_PRELOAD"))))
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", _TABLE],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=900,
    )  # fmt: skip
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    assert proc.returncode == 0, f"child died after {rows[-1:]}:\n{proc.stderr[-3000:]}"
    bad = [r for r in rows if r[1] != "ValueError"]
    assert not bad, bad
    assert len(rows) == _TABLE.count('": lambda')


@pytest.mark.parametrize("threads", [1, 2])
def test_products_and_attention_read_only_their_buffers(threads):
    """Operands, bias and mask each between guard pages (end-aligned), sized to take
    the native pool paths at 2 threads: matmul, packed matmul, attention, KV-cache
    attention, against float64 numpy."""
    from onnxexec.kernels.attn.attention import kv_attention
    from onnxexec.kernels.attn.mha import attention, attention_reference
    from onnxexec.kernels.linalg import sgemm_packed
    from onnxexec.kernels.linalg.gemm import linear, linear_packed

    old = parallel.num_threads()
    parallel.set_num_threads(threads)
    try:
        with guarded((120, 130)) as x, guarded((130, 72)) as w, guarded((72,)) as b:
            want = x.astype(np.float64) @ w + b
            np.testing.assert_allclose(linear(x, w, b), want, rtol=1e-4, atol=1e-3)
            if sgemm_packed.AVAILABLE:
                wp = sgemm_packed.pack(w)
                with guarded(wp.shape) as gp:
                    gp[...] = wp
                    got = linear_packed(x, gp, 72, b)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        with (
            guarded((2, 4, 9, 16)) as q,
            guarded((2, 2, 16, 33)) as kt,
            guarded((2, 2, 33, 16)) as v,
            guarded((1, 1, 9, 33)) as mask,
        ):
            got = attention(q, kt, v, mask, 0.25, False)
            want = attention_reference(q, kt, v, mask, 0.25, False)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        with guarded((3, 64)) as q, guarded((12, 2, 16)) as kc, guarded((12, 2, 16)) as vc:
            got = kv_attention(q, kc, vc, 9, 0.25)
            # reference: query t at position 9 + t sees cache rows 0..9 + t; head h
            # reads kv head h // 2 (GQA)
            want = np.empty((3, 64))
            for t in range(3):
                for h in range(4):
                    kk = kc[: 10 + t, h // 2].astype(np.float64)
                    s = kk @ q[t, h * 16 : (h + 1) * 16] * 0.25
                    p = np.exp(s - s.max())
                    want[t, h * 16 : (h + 1) * 16] = (p / p.sum()) @ vc[: 10 + t, h // 2]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    finally:
        parallel.set_num_threads(old)
