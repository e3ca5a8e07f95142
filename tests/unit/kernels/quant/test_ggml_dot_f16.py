"""kernels/quant/ggml_dot_f16.py: F16 / BF16 / F32 products in llama.cpp's orders (vec_dot for
one row, tinyBLAS<8> for several), against numpy written out per output value."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.ggml_dot_f16 import ggml_dot_float, round_act
from tests.unit.kernels import _ggml_ref as ref


def _weights(t, n, k, rng):
    w = rng.standard_normal((n, k)).astype(np.float32)
    if t == q.F16:
        return w.astype(np.float16).view(np.uint16), w.astype(np.float16).astype(np.float32)
    if t == q.BF16:
        bits = (w.view(np.uint32) >> 16).astype(np.uint16)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32)
    return w, w


def _reference(t, wf, x, tiny):
    rows, k = x.shape
    n = wf.shape[0]
    out = np.empty((rows, n), np.float32)
    for ti in range(rows):
        for r in range(n):
            w, xv = wf[r], x[ti]
            if tiny:
                acc = np.zeros(8, np.float32)
                for i in range(0, k, 8):
                    acc = ref.fma(w[i : i + 8], xv[i : i + 8], acc)
                out[ti, r] = ref.hsum8(acc)
                continue
            s = np.zeros(32, np.float32)
            np_ = k - k % 32
            for i in range(0, np_, 32):
                s = ref.fma(w[i : i + 32], xv[i : i + 32], s)
            s4 = s.reshape(4, 8)
            v = ((s4[0] + s4[2]).astype(np.float32) + (s4[1] + s4[3])).astype(np.float32)
            g = (v[:4] + v[4:]).astype(np.float32)
            if t == q.BF16:
                res = ref.f32(ref.f32(g[0] + g[2]) + ref.f32(g[1] + g[3]))
            else:
                res = ref.f32(ref.f32(g[0] + g[1]) + ref.f32(g[2] + g[3]))
            if t == q.F32:
                for i in range(np_, k):
                    res = ref.fma(w[i], xv[i], res)
                out[ti, r] = res
            else:
                tot = float(res)
                for i in range(np_, k):
                    tot += float(np.float32(w[i] * xv[i]))
                out[ti, r] = np.float32(tot)
    return out


@pytest.mark.parametrize("t", [q.F16, q.BF16, q.F32], ids=lambda t: q.type_name(t))
@pytest.mark.parametrize(("rows", "n", "k"), [(1, 4, 72), (3, 4, 64), (3, 5, 40), (2, 4, 36)])
def test_matches_reference(t, rows, n, k):
    rng = np.random.default_rng(t + rows + n + k)
    stored, wf = _weights(t, n, k, rng)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    out = np.empty((rows, n), np.float32)
    ggml_dot_float(stored, t, x, out)
    tiny = rows >= 2 and k % 8 == 0 and n % 4 == 0
    np.testing.assert_array_equal(
        out, _reference(t, wf, round_act(x, {q.F16: 0, q.BF16: 1, q.F32: 2}[t]), tiny)
    )


def test_round_act():
    x = np.array([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 70000.0, 1.0 + 2.0**-8, np.nan], np.float32)
    np.testing.assert_array_equal(round_act(x, 0)[:3], [1.0, 1.0 + 2.0**-9, np.inf])
    bf = round_act(x, 1)
    assert bf[3] == 1.0 and bf[0] == 1.0 and np.isnan(bf[4])
    assert round_act(np.array([1.0 + 3 * 2.0**-8], np.float32), 1)[0] == 1.0 + 2.0**-6
