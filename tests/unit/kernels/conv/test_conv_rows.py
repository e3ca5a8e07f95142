"""kernels.conv.conv_rows / conv_gemm.rows_conv (an im2row matrix from an HWC copy of the
input, one sgemm with B transposed) against a float64 numpy conv: strides, asymmetric
pads, dilation, non-square kernels, groups, batch, channel counts off the 16-row split,
bias / residual / activation, one and two threads, and conv2d's dispatch to it."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.kernels.activation_kinds import ACT
from onnxexec.kernels.conv import conv2d as conv2d_mod
from onnxexec.kernels.conv.conv2d import conv2d
from onnxexec.kernels.conv.conv_rows import im2row, to_hwc, use_rows
from onnxexec.kernels.conv.conv_taps import to_ohwi
from onnxexec.native import parallel
from tests.unit.kernels.conv.test_conv2d import _reference


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = parallel.num_threads()
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(old)


@pytest.fixture(autouse=True)
def no_direct(monkeypatch):
    """The direct kernel (kernels/conv/conv_direct.py) takes these shapes first on AVX-512
    hosts; turned off here so that the im2row path itself is what runs."""
    import onnxexec.kernels.conv.conv2d as conv2d_module

    monkeypatch.setattr(conv2d_module, "use_direct", lambda *args: False)


@pytest.fixture
def rows_calls(monkeypatch):
    """Counts conv2d's calls into the im2row path."""
    calls = []
    real = conv2d_mod.rows_conv

    def counted(*args):
        calls.append(1)
        real(*args)

    monkeypatch.setattr(conv2d_mod, "rows_conv", counted)
    return calls


CASES = [
    # x shape, w shape, strides, pads (t, l, b, r), dilations, group
    ((1, 32, 7, 7), (64, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # ResNet's 7x7 stage
    ((2, 16, 9, 8), (96, 16, 3, 3), (2, 1), (1, 0, 2, 1), (1, 1), 1),  # batch, mixed strides
    ((1, 24, 10, 10), (128, 24, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilation 2
    ((1, 64, 6, 6), (96, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),  # grouped
    ((1, 16, 13, 14), (40, 16, 5, 3), (3, 3), (2, 1, 1, 2), (1, 2), 1),  # 5x3, stride 3
    ((1, 16, 2, 2), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # tiny: one thread
    ((1, 20, 5, 5), (77, 20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # M off the 16s
    ((1, 48, 14, 14), (64, 48, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),  # strided, 7x7 out
]


@pytest.mark.parametrize("xs, ws, s, p, d, group", CASES)
def test_rows_path_against_reference(threads, rows_calls, xs, ws, s, p, d, group) -> None:
    x = _rand(*xs)
    w = to_ohwi(_rand(*ws, seed=1) * np.float32(0.1))
    b = _rand(ws[0], seed=2)
    want, out_hw = _reference(x, w, b, s, p, d, group)
    assert use_rows(ws[1], ws[0] // group, out_hw[0] * out_hw[1], ws[2], ws[3])
    got = conv2d(x, w, b, s, p[:2], d, group, out_hw, ACT["Clip"], -1.0, 1.0)
    np.testing.assert_allclose(got, np.clip(want, -1, 1), rtol=1e-4, atol=1e-4)
    z = _rand(*want.shape, seed=3)
    want_z = want - b[None, :, None, None] + z
    got = conv2d(x, w, None, s, p[:2], d, group, out_hw, 0, z=z)
    np.testing.assert_allclose(got, want_z, rtol=1e-4, atol=1e-4)
    got = conv2d(x, w, b, s, p[:2], d, group, out_hw, ACT["Relu"], z=z)
    np.testing.assert_allclose(got, np.maximum(want + z, 0), rtol=1e-4, atol=1e-4)
    assert len(rows_calls) == 3 * xs[0] * group


def test_oihw_weight_takes_another_path(rows_calls) -> None:
    """The K order (a, b, c) needs the OHWI layout: an OIHW weight falls back."""
    x = _rand(1, 32, 7, 7)
    w = _rand(64, 32, 3, 3, seed=1) * np.float32(0.1)
    want, out_hw = _reference(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    got = conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1, out_hw)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert not rows_calls


def test_use_rows_bounds() -> None:
    assert use_rows(512, 512, 49, 3, 3)
    assert not use_rows(512, 512, 49, 1, 1)  # 1x1: the pointwise path
    assert not use_rows(64, 64, 3136, 3, 3)  # more pixels than channels: tap GEMMs
    assert not use_rows(8, 64, 49, 3, 3)  # short copies


def test_im2row_layout() -> None:
    """R[p, (a*KW + b)*Cg + c] is the padded input under tap (a, b) of pixel p."""
    x = _rand(3, 5, 6)
    ph, pw, kh, kw, sh, sw, dh, dw = 1, 2, 2, 3, 2, 1, 2, 1
    hp, wp = 5 + ph + 1, 6 + pw + 2
    xp = np.full((hp, wp, 2), np.nan, dtype=np.float32)
    to_hwc(x, 1, 3, ph, pw, xp)  # channels 1 and 2
    pad = np.zeros((2, hp, wp), dtype=np.float32)
    pad[:, ph : ph + 5, pw : pw + 6] = x[1:3]
    np.testing.assert_array_equal(xp, pad.transpose(1, 2, 0))
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    rows = np.empty((oh * ow, kh * kw * 2), dtype=np.float32)
    im2row(xp, kh, kw, sh, sw, dh, dw, ow, 0, oh * ow, rows)
    for q in range(oh * ow):
        i, j = divmod(q, ow)
        for a in range(kh):
            for bb in range(kw):
                want = pad[:, i * sh + a * dh, j * sw + bb * dw]
                np.testing.assert_array_equal(
                    rows[q, (a * kw + bb) * 2 : (a * kw + bb + 1) * 2], want
                )
