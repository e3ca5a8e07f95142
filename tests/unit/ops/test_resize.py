"""Resize (10, 11, 13, 18, 19) and Upsample.

Source coordinates are written out from the Resize-19 doc formulas; linear values
come from np.interp (which clamps to the edge values exactly as Resize does), cubic
from the Keys kernel written out here.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node, run_ort

DATA = np.array([1.0, 4.0, 2.0, 8.0, 3.0], np.float32)


def resize_1d(data, opset=19, scales=None, sizes=None, **attrs):
    x = data.reshape(1, 1, 1, -1)
    sc = None if scales is None else np.array([1, 1, 1, scales], np.float32)
    sz = None if sizes is None else np.array([1, 1, 1, sizes], np.int64)
    (y,) = run_node("Resize", [x, None, sc, sz], opset=opset, **attrs)
    return y.reshape(-1)


def lin(coords):
    return np.interp(coords, np.arange(DATA.size), DATA)


@pytest.mark.parametrize(
    "ctm",
    ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"],
)
def test_linear_each_coordinate_transformation_mode(ctm):
    n_in, n_out = 5, 8
    s = n_out / n_in
    y = np.arange(n_out, dtype=np.float64)
    expected_x = {
        "half_pixel": (y + 0.5) / s - 0.5,
        "pytorch_half_pixel": (y + 0.5) / s - 0.5,
        "align_corners": y * (n_in - 1) / (n_out - 1),
        "asymmetric": y / s,
        # sizes give an integral output_width, so the adjustment is 1 and offset 0
        "half_pixel_symmetric": (y + 0.5) / s - 0.5,
    }[ctm]
    out = resize_1d(DATA, sizes=n_out, mode="linear", coordinate_transformation_mode=ctm)
    np.testing.assert_allclose(out, lin(expected_x), rtol=1e-6)


def test_half_pixel_symmetric_with_fractional_output_width():
    # scale 1.7 on 5: output_width 8.5, int 8; offset = 5/2 * (1 - 8/8.5)
    out = resize_1d(
        DATA, scales=1.7, mode="linear", coordinate_transformation_mode="half_pixel_symmetric"
    )
    y = np.arange(8)
    x = 2.5 * (1 - 8 / 8.5) + (y + 0.5) / np.float32(1.7) - 0.5
    np.testing.assert_allclose(out, lin(x), rtol=1e-5)


def test_pytorch_half_pixel_single_output_is_zero():
    out = resize_1d(
        DATA, sizes=1, mode="linear", coordinate_transformation_mode="pytorch_half_pixel"
    )
    np.testing.assert_allclose(out, [DATA[0]])


@pytest.mark.parametrize(
    "mode,expected",
    [
        # asymmetric, scale 4: x = 0, .25, .5, .75 per input element
        ("round_prefer_floor", [0, 0, 0, 1]),
        ("round_prefer_ceil", [0, 0, 1, 1]),
        ("floor", [0, 0, 0, 0]),
        ("ceil", [0, 1, 1, 1]),
    ],
)
def test_nearest_modes(mode, expected):
    data = np.array([10.0, 20.0], np.float32)
    out = resize_1d(
        data,
        scales=4.0,
        mode="nearest",
        nearest_mode=mode,
        coordinate_transformation_mode="asymmetric",
    )
    idx = np.clip(np.array(expected + [e + 1 for e in expected]), 0, 1)
    np.testing.assert_array_equal(out, data[idx])


def keys(t, a):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t**3 - (a + 3) * t**2 + 1
    if t < 2:
        return a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a
    return 0.0


def cubic_ref(data, x, a, exclude_outside=False):
    out = []
    for xi in x:
        f = int(np.floor(xi))
        taps = [f - 1, f, f + 1, f + 2]
        w = np.array([keys(xi - t, a) for t in taps])
        if exclude_outside:
            w = np.where([0 <= t < data.size for t in taps], w, 0)
            w = w / w.sum()
        vals = data[np.clip(taps, 0, data.size - 1)]
        out.append(float(np.dot(w, vals)))
    return np.array(out)


@pytest.mark.parametrize("a", [-0.75, -0.5])
@pytest.mark.parametrize("exclude", [0, 1])
def test_cubic_coeff_a_and_exclude_outside(a, exclude):
    out = resize_1d(DATA, sizes=7, mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    s = 7 / 5
    x = (np.arange(7) + 0.5) / s - 0.5
    np.testing.assert_allclose(
        out, cubic_ref(DATA.astype(np.float64), x, a, bool(exclude)), rtol=1e-5, atol=1e-6
    )


def test_linear_antialias_downsample_by_two():
    # scale 0.5: the triangle filter is stretched to radius 2; x = 2y + 0.5, taps
    # 2y-1 .. 2y+2 at distances 1.5, .5, .5, 1.5 -> weights (.25, .75, .75, .25) / 2
    data = np.arange(8, dtype=np.float32) ** 2
    out = resize_1d(data, opset=18, scales=0.5, mode="linear", antialias=1)
    w = np.array([0.25, 0.75, 0.75, 0.25]) / 2
    ref = [sum(w[k] * data[min(max(2 * y - 1 + k, 0), 7)] for k in range(4)) for y in range(4)]
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    plain = resize_1d(data, opset=18, scales=0.5, mode="linear")
    np.testing.assert_allclose(plain, np.interp(2 * np.arange(4) + 0.5, np.arange(8), data))


@pytest.mark.parametrize(
    "policy,shape", [("stretch", (3, 3)), ("not_larger", (2, 3)), ("not_smaller", (3, 5))]
)
def test_keep_aspect_ratio_policy(policy, shape):
    # in (4, 6), sizes (3, 3): not_larger scale min(3/4, 3/6) = .5 -> (2, 3);
    # not_smaller scale .75 -> (3, round_half_up(4.5) = 5)
    x = np.arange(24, dtype=np.float32).reshape(1, 1, 4, 6)
    (y,) = run_node(
        "Resize",
        [x, None, None, np.array([3, 3], np.int64)],
        opset=18,
        axes=[2, 3],
        keep_aspect_ratio_policy=policy,
    )
    assert y.shape == (1, 1, *shape)


def test_tf_crop_and_resize_extrapolation():
    # roi [0.4, 1.2] of a length-5 axis, 4 outputs: x = 0.4*4 + y*0.8*4/3
    roi = np.array([0, 0, 0, 0.4, 1, 1, 1, 1.2], np.float32)
    x = DATA.reshape(1, 1, 1, -1)
    (y,) = run_node(
        "Resize",
        [x, roi, None, np.array([1, 1, 1, 4], np.int64)],
        opset=13,
        mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-7.0,
    )
    xs = np.float32(0.4) * 4 + np.arange(4) * (np.float32(1.2) - np.float32(0.4)) * 4 / 3
    ref = np.where(xs > 4, -7.0, lin(xs))
    np.testing.assert_allclose(y.reshape(-1), ref, rtol=1e-5)


def test_2d_linear_and_cubic_match_onnxruntime():
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 7)).astype(np.float32)
    for mode in ("linear", "cubic"):
        ins = [x, None, np.array([1, 1, 1.6, 0.6], np.float32)]
        (y,) = run_node("Resize", ins, opset=13, mode=mode)
        (ref,) = run_ort("Resize", ins, opset=13, mode=mode)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_nearest_keeps_integer_dtype_and_axes():
    x = np.arange(6, dtype=np.int32).reshape(1, 2, 3)
    (y,) = run_node("Resize", [x, None, np.array([2.0], np.float32)], opset=19, axes=[-1])
    assert y.dtype == np.int32 and y.shape == (1, 2, 6)


def test_resize_v11_and_v10_and_upsample():
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    rep = np.repeat(np.repeat(x, 2, axis=2), 3, axis=3)
    sc = np.array([1, 1, 2, 3], np.float32)
    (y11,) = run_node(
        "Resize",
        [x, np.array([], np.float32), sc],
        opset=11,
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    (y10,) = run_node("Resize", [x, sc], opset=10)
    (u9,) = run_node("Upsample", [x, sc], opset=9)
    (u7,) = run_node("Upsample", [x], opset=7, scales=[1.0, 1.0, 2.0, 3.0])
    for y in (y11, y10, u9, u7):
        np.testing.assert_array_equal(y, rep)
    # Resize-10 linear is asymmetric: x = y / 2 -> 1, 1.5, 2, 2 (edge)
    (yl,) = run_node(
        "Resize", [x[..., :1, :], np.array([1, 1, 1, 2], np.float32)], opset=10, mode="linear"
    )
    np.testing.assert_allclose(yl.reshape(-1), [1, 1.5, 2, 2])


NEAREST_CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]


@pytest.mark.parametrize("ctm", NEAREST_CTMS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor"])
@pytest.mark.parametrize("scales", [(2.0, 2.0), (3.0, 1.0), (2.0, 1.5), (0.5, 2.0)])
def test_nearest_replication_fast_path_matches_onnxruntime(ctm, nearest_mode, scales):
    # integer factors take the broadcast-copy path when the index table is plain
    # replication (half_pixel / asymmetric at x2); align_corners or a 1.5 factor do not
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 6)).astype(np.float32)
    ins = [x, None, np.array([1, 1, *scales], np.float32)]
    attrs = {"mode": "nearest", "coordinate_transformation_mode": ctm, "nearest_mode": nearest_mode}
    (y,) = run_node("Resize", ins, opset=13, **attrs)
    (ref,) = run_ort("Resize", ins, opset=13, **attrs)
    np.testing.assert_array_equal(y, ref)


def test_nearest_x2_asymmetric_floor_is_np_repeat():
    x = np.arange(2 * 3 * 5, dtype=np.int64).reshape(1, 2, 3, 5)
    ins = [x, None, np.array([1, 1, 2, 2], np.float32)]
    (y,) = run_node(
        "Resize", ins, opset=13, coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    )
    assert y.dtype == np.int64 and y.flags.c_contiguous
    np.testing.assert_array_equal(y, np.repeat(np.repeat(x, 2, axis=2), 2, axis=3))


@pytest.mark.parametrize("reps", [(2, 1, 3, 2), (1, 4, 1, 1), (3, 2, 2, 5), (1, 1, 1, 2)])
@pytest.mark.parametrize("block_bytes", [1, 300, 1 << 20])  # 1 B: a block per leading index
def test_replicate_matches_np_repeat(reps, block_bytes, monkeypatch):
    from onnxexec.ops import resize

    monkeypatch.setattr(resize, "_BLOCK_BYTES", block_bytes)
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
    ref = x
    for ax, k in enumerate(reps):
        ref = np.repeat(ref, k, axis=ax)
    np.testing.assert_array_equal(resize._replicate(x, reps), ref)
