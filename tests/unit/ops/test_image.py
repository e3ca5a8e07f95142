"""GridSample, AffineGrid, Col2Im, DepthToSpace, SpaceToDepth, CenterCropPad,
RoiAlign, MaxRoiPool, NonMaxSuppression (image.py, roi.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node, run_ort

RNG = np.random.default_rng(4)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# --- GridSample / AffineGrid ---


def pixel_grid(h: int, w: int, align: bool) -> np.ndarray:
    """Normalized (x, y) grid that lands exactly on every pixel centre."""

    def norm(i, n):
        return 2 * i / (n - 1) - 1 if align else (2 * i + 1) / n - 1

    ys, xs = np.meshgrid(norm(np.arange(h), h), norm(np.arange(w), w), indexing="ij")
    return np.stack([xs, ys], -1)[None].astype(np.float32)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_on_pixel_centres_is_identity(mode, align):
    x = rand(1, 2, 4, 5)
    (y,) = run_node(
        "GridSample", [x, pixel_grid(4, 5, bool(align))], opset=20, mode=mode, align_corners=align
    )
    np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)


def test_grid_sample_bilinear_point_and_padding_modes():
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    # align_corners=1: (x, y) = (0, 0) is the centre of the image -> mean 2.5;
    # x = 1.5 lies half a pixel beyond the right column.
    grid = np.array([[[[0.0, 0.0], [3.0, -1.0]]]], np.float32)
    (z,) = run_node("GridSample", [x, grid], opset=16, align_corners=1)
    (b,) = run_node("GridSample", [x, grid], opset=16, align_corners=1, padding_mode="border")
    (r,) = run_node("GridSample", [x, grid], opset=16, align_corners=1, padding_mode="reflection")
    # pixel x for grid 3.0: (3 + 1) / 2 * 1 = 2 -> 1 beyond the last column (index 1)
    np.testing.assert_allclose(z.reshape(-1), [2.5, 0.0])
    np.testing.assert_allclose(b.reshape(-1), [2.5, 2.0])  # clamped to x = 1, y = 0
    np.testing.assert_allclose(r.reshape(-1), [2.5, 1.0])  # reflected 2 -> 0


def test_grid_sample_cubic_reflection_matches_onnxruntime():
    x, grid = rand(2, 3, 5, 6), RNG.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(np.float32)
    for pad in ("zeros", "border", "reflection"):
        for mode in ("bilinear", "bicubic", "nearest"):
            (y,) = run_node("GridSample", [x, grid], opset=16, mode=mode, padding_mode=pad)
            (ref,) = run_ort("GridSample", [x, grid], opset=16, mode=mode, padding_mode=pad)
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=f"{mode} {pad}")


def test_grid_sample_3d_trilinear_centre():
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    (y,) = run_node(
        "GridSample", [x, np.zeros((1, 1, 1, 1, 3), np.float32)], opset=22, align_corners=1
    )
    np.testing.assert_allclose(y.reshape(-1), [3.5])


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_identity(align):
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    (g,) = run_node(
        "AffineGrid", [theta, np.array([1, 1, 3, 4], np.int64)], opset=20, align_corners=align
    )
    np.testing.assert_allclose(g, pixel_grid(3, 4, bool(align)), rtol=1e-6, atol=1e-7)
    theta3 = np.array([[[2, 0, 0, 0.5], [0, 1, 0, 0], [0, 0, 1, 0]]], np.float32)
    (g3,) = run_node(
        "AffineGrid", [theta3, np.array([1, 1, 2, 2, 2], np.int64)], opset=20, align_corners=1
    )
    assert g3.shape == (1, 2, 2, 2, 3)
    np.testing.assert_allclose(g3[0, 0, 0, 1], [2 * 1 + 0.5, -1, -1])  # x = w index 1


# --- Col2Im / DepthToSpace / SpaceToDepth / CenterCropPad ---


def test_col2im_sums_overlapping_blocks():
    # 1-channel 3x3 image, 2x2 blocks stride 1 -> 4 blocks; all-ones columns count overlaps
    cols = np.ones((1, 4, 4), np.float32)
    (y,) = run_node(
        "Col2Im", [cols, np.array([3, 3], np.int64), np.array([2, 2], np.int64)], opset=18
    )
    np.testing.assert_array_equal(y[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    # pads 1 and stride 2 on 4x4: 3 blocks per axis, starting at -1, 1, 3
    cols = np.arange(36, dtype=np.float32).reshape(1, 4, 9)
    (y2,) = run_node(
        "Col2Im",
        [cols, np.array([4, 4], np.int64), np.array([2, 2], np.int64)],
        opset=18,
        strides=[2, 2],
        pads=[1, 1, 1, 1],
    )
    ref = np.zeros((6, 6), np.float32)
    for k in range(4):
        ki, kj = divmod(k, 2)
        for b in range(9):
            bi, bj = divmod(b, 3)
            ref[2 * bi + ki, 2 * bj + kj] += cols[0, k, b]
    np.testing.assert_array_equal(y2[0, 0], ref[1:5, 1:5])


def test_depth_to_space_modes_and_space_to_depth_inverse():
    x = np.arange(8, dtype=np.float32).reshape(1, 8, 1, 1)
    (dcr,) = run_node("DepthToSpace", [x], opset=13, blocksize=2)
    (crd,) = run_node("DepthToSpace", [x], opset=13, blocksize=2, mode="CRD")
    # DCR: output channel c, pixel (i, j) <- input channel (i*2 + j) * 2 + c
    np.testing.assert_array_equal(dcr[0, 0], [[0, 2], [4, 6]])
    # CRD: <- input channel c * 4 + i*2 + j
    np.testing.assert_array_equal(crd[0, 0], [[0, 1], [2, 3]])
    (d1,) = run_node("DepthToSpace", [x], opset=1, blocksize=2)
    np.testing.assert_array_equal(d1, dcr)
    z = rand(2, 3, 4, 6)
    for mode in ("DCR", "CRD"):
        (s,) = run_node("SpaceToDepth", [z], opset=28, blocksize=2, mode=mode)
        (back,) = run_node("DepthToSpace", [s], opset=28, blocksize=2, mode=mode)
        np.testing.assert_array_equal(back, z)
    (s1,) = run_node("SpaceToDepth", [z], opset=1, blocksize=2)
    assert s1.shape == (2, 12, 2, 3)


def test_center_crop_pad():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    (y,) = run_node("CenterCropPad", [x, np.array([2, 8], np.int64)], opset=18)
    # rows: crop 4 -> 2 from offset 1; cols: pad 5 -> 8, 1 before and 2 after
    ref = np.zeros((2, 8), np.float32)
    ref[:, 1:6] = x[1:3]
    np.testing.assert_array_equal(y, ref)
    (y2,) = run_node("CenterCropPad", [x, np.array([3], np.int64)], opset=18, axes=[-1])
    np.testing.assert_array_equal(y2, x[:, 1:4])


# --- RoiAlign / MaxRoiPool / NMS ---


@pytest.mark.parametrize(
    "opset,attrs",
    [
        (16, {"coordinate_transformation_mode": "half_pixel"}),
        (16, {"coordinate_transformation_mode": "output_half_pixel", "mode": "max"}),
        (10, {"sampling_ratio": 2}),
    ],
)
def test_roi_align_matches_onnxruntime(opset, attrs):
    x = rand(2, 3, 10, 12)
    rois = np.array([[1, 1, 8, 6], [0, 2.5, 11, 9.7], [3, 3, 3.5, 4], [-2, -1, 4, 12]], np.float32)
    idx = np.array([0, 1, 1, 0], np.int64)
    kw = dict(output_height=3, output_width=4, spatial_scale=0.9, **attrs)
    (y,) = run_node("RoiAlign", [x, rois, idx], opset=opset, **kw)
    (ref,) = run_ort("RoiAlign", [x, rois, idx], opset=opset, **kw)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_max_roi_pool():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    rois = np.array([[0, 0, 0, 3, 3], [0, 1, 1, 2, 2]], np.float32)
    (y,) = run_node("MaxRoiPool", [x, rois], opset=22, pooled_shape=[2, 2])
    np.testing.assert_array_equal(y[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(y[1, 0], [[5, 6], [9, 10]])


def test_nms_greedy_by_score_and_iou():
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0, 0, 1, 1]]], np.float32)
    scores = np.array([[[0.9, 0.95, 0.5, 0.9], [0.1, 0.2, 0.3, 0.05]]], np.float32)
    (sel,) = run_node(
        "NonMaxSuppression",
        [
            boxes,
            scores,
            np.array([3], np.int64),
            np.array([0.5], np.float32),
            np.array([0.15], np.float32),
        ],
        opset=11,
    )
    # class 0: box 1 (0.95) kept, 0 and 3 overlap it (IoU .82), box 2 kept.
    # class 1: only scores > 0.15 -> boxes 2 (0.3) then 1 (0.2).
    np.testing.assert_array_equal(sel, [[0, 0, 1], [0, 0, 2], [0, 1, 2], [0, 1, 1]])
    (none,) = run_node("NonMaxSuppression", [boxes, scores], opset=10)
    assert none.shape == (0, 3) and none.dtype == np.int64


def test_nms_center_point_box_and_tie_order():
    boxes = np.array([[[0.5, 0.5, 1, 1], [5, 5, 1, 1]]], np.float32)  # (xc, yc, w, h)
    scores = np.array([[[0.7, 0.7]]], np.float32)
    (sel,) = run_node(
        "NonMaxSuppression", [boxes, scores, np.array([5], np.int64)], opset=11, center_point_box=1
    )
    np.testing.assert_array_equal(sel, [[0, 0, 0], [0, 0, 1]])  # equal scores: index order
