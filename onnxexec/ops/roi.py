"""Region ops: RoiAlign, MaxRoiPool, NonMaxSuppression.

These loop over regions / greedy selections (inherently sequential or ragged), and
vectorize over channels and sampling points inside each region.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.registry import op

# --- RoiAlign ---


def _axis_samples(
    start: float, bin_size: float, pooled: int, grid: int, length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear taps of the sampling points along one axis of one RoI.

    Sample (p, i) sits at start + p * bin + (i + 0.5) * bin / grid. As onnxruntime:
    a point beyond [-1, length] contributes 0; others clamp to >= 0 and collapse
    onto the last row/column when past it. Returns low/high index and low/high
    weight, each (pooled, grid), with weights 0 for dropped points.
    """
    p = np.arange(pooled)[:, None]
    i = np.arange(grid)[None, :]
    pos = start + p * bin_size + (i + 0.5) * bin_size / grid
    valid = (pos >= -1.0) & (pos <= length)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_end = low >= length - 1
    low = np.where(at_end, length - 1, low)
    high = np.where(at_end, length - 1, low + 1)
    pos = np.where(at_end, low.astype(np.float64), pos)
    frac = pos - low
    w_low = np.where(valid, 1.0 - frac, 0.0)
    w_high = np.where(valid, frac, 0.0)
    return np.where(valid, low, 0), np.where(valid, high, 0), w_low, w_high


def _roi_align_one(
    img: np.ndarray,
    roi: np.ndarray,
    *,
    oh: int,
    ow: int,
    ratio: int,
    scale: float,
    half_pixel: bool,
    mode: str,
) -> np.ndarray:
    """img (C, H, W), roi [x1, y1, x2, y2] -> (C, oh, ow)."""
    h, w = img.shape[1:]
    off = 0.5 if half_pixel else 0.0
    x1, y1, x2, y2 = (float(v) * scale - off for v in roi)
    rw, rh = x2 - x1, y2 - y1
    if not half_pixel:  # legacy: force malformed RoIs to 1x1
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / oh, rw / ow
    gh = ratio if ratio > 0 else int(np.ceil(rh / oh))
    gw = ratio if ratio > 0 else int(np.ceil(rw / ow))
    yl, yh, wyl, wyh = _axis_samples(y1, bh, oh, gh, h)
    xl, xh, wxl, wxh = _axis_samples(x1, bw, ow, gw, w)
    # corner values (C, oh, gh, ow, gw) for the four bilinear corners
    corners = []
    for yi, wy in ((yl, wyl), (yh, wyh)):
        rows = img[:, yi]  # (C, oh, gh, W)
        for xi, wx in ((xl, wxl), (xh, wxh)):
            v = rows[:, :, :, xi]  # (C, oh, gh, ow, gw)
            corners.append(v * (wy[:, :, None, None] * wx[None, None]))
    if mode == "avg":
        total = corners[0] + corners[1] + corners[2] + corners[3]
        return total.sum(axis=(2, 4)) / max(gh * gw, 1)
    if mode == "max":  # onnxruntime: max over points of the largest weighted corner
        best = np.maximum(np.maximum(corners[0], corners[1]), np.maximum(corners[2], corners[3]))
        return best.max(axis=(2, 4))
    raise ValueError(f"RoiAlign: unknown mode '{mode}'")


def _roi_align(x, rois, batch_indices, ctm, mode, oh, ow, ratio, scale):
    n_rois = rois.shape[0]
    dt = np.float64 if x.dtype == np.float64 else np.float32
    y = np.zeros((n_rois, x.shape[1], oh, ow), dtype=dt)
    xf = x.astype(np.float64)
    for r in range(n_rois):
        y[r] = _roi_align_one(
            xf[int(batch_indices[r])],
            rois[r],
            oh=oh,
            ow=ow,
            ratio=ratio,
            scale=scale,
            half_pixel=ctm == "half_pixel",
            mode=mode,
        )
    return y.astype(x.dtype)


@op("RoiAlign", since=16)
def roi_align(
    x: np.ndarray,
    rois: np.ndarray,
    batch_indices: np.ndarray,
    *,
    coordinate_transformation_mode: str = "half_pixel",
    mode: str = "avg",
    output_height: int = 1,
    output_width: int = 1,
    sampling_ratio: int = 0,
    spatial_scale: float = 1.0,
) -> np.ndarray:
    """X (N, C, H, W), rois (R, 4) [x1, y1, x2, y2], batch_indices (R,) -> (R, C, oh, ow)."""
    return _roi_align(
        x,
        rois,
        batch_indices,
        coordinate_transformation_mode,
        mode,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
    )


@op("RoiAlign", since=10)
def roi_align_v10(
    x: np.ndarray,
    rois: np.ndarray,
    batch_indices: np.ndarray,
    *,
    mode: str = "avg",
    output_height: int = 1,
    output_width: int = 1,
    sampling_ratio: int = 0,
    spatial_scale: float = 1.0,
) -> np.ndarray:
    """Opset 10: no pixel shift ("output_half_pixel" behaviour)."""
    return _roi_align(
        x,
        rois,
        batch_indices,
        "output_half_pixel",
        mode,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
    )


# --- MaxRoiPool ---


@op("MaxRoiPool", since=1)
def max_roi_pool(
    x: np.ndarray, rois: np.ndarray, *, pooled_shape: tuple[int, ...], spatial_scale: float = 1.0
) -> np.ndarray:
    """X (N, C, H, W), rois (R, 5) [batch, x1, y1, x2, y2] -> (R, C, ph, pw).

    Caffe's RoIPooling: corners rounded after scaling, each bin spans
    [floor(p * bin), ceil((p + 1) * bin)) clipped to the image; empty bins give 0.
    """
    ph, pw = pooled_shape
    h, w = x.shape[2:]
    y = np.zeros((rois.shape[0], x.shape[1], ph, pw), dtype=x.dtype)
    for r, roi in enumerate(rois):
        b = int(roi[0])
        x1, y1, x2, y2 = (int(np.round(float(v) * spatial_scale)) for v in roi[1:5])
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            hs = min(max(int(np.floor(i * bh)) + y1, 0), h)
            he = min(max(int(np.ceil((i + 1) * bh)) + y1, 0), h)
            for j in range(pw):
                ws = min(max(int(np.floor(j * bw)) + x1, 0), w)
                we = min(max(int(np.ceil((j + 1) * bw)) + x1, 0), w)
                if he > hs and we > ws:
                    y[r, :, i, j] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return y


# --- NonMaxSuppression ---


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """(B, 4) boxes -> (B, 4) [y_min, x_min, y_max, x_max]."""
    b = boxes.astype(np.float64)
    if center_point_box:
        xc, yc, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    y = np.sort(b[:, [0, 2]], axis=1)
    x = np.sort(b[:, [1, 3]], axis=1)
    return np.stack([y[:, 0], x[:, 0], y[:, 1], x[:, 1]], axis=1)


def _iou(c: np.ndarray) -> np.ndarray:
    """Pairwise IoU of (K, 4) corner boxes; 0 where either box is degenerate."""
    ymin = np.maximum(c[:, None, 0], c[None, :, 0])
    xmin = np.maximum(c[:, None, 1], c[None, :, 1])
    ymax = np.minimum(c[:, None, 2], c[None, :, 2])
    xmax = np.minimum(c[:, None, 3], c[None, :, 3])
    inter = np.clip(ymax - ymin, 0, None) * np.clip(xmax - xmin, 0, None)
    area = (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])
    union = area[:, None] + area[None, :] - inter
    ok = (inter > 0) & (area[:, None] > 0) & (area[None, :] > 0) & (union > 0)
    return np.where(ok, inter / np.where(union > 0, union, 1.0), 0.0)


@op("NonMaxSuppression", since=10)
def non_max_suppression(
    boxes: np.ndarray,
    scores: np.ndarray,
    max_output_boxes_per_class: np.ndarray | None = None,
    iou_threshold: np.ndarray | None = None,
    score_threshold: np.ndarray | None = None,
    *,
    center_point_box: int = 0,
) -> np.ndarray:
    """boxes (B, N, 4), scores (B, C, N) -> selected (K, 3) int64 [batch, class, box].

    Per (batch, class): candidates with score > score_threshold (when given), by
    descending score (ties: lower index first); greedily keep a box unless its IoU
    with an already kept one exceeds iou_threshold; at most max_output_boxes_per_class.
    """
    limit = (
        0
        if max_output_boxes_per_class is None or not max_output_boxes_per_class.size
        else max(int(max_output_boxes_per_class.reshape(-1)[0]), 0)
    )
    iou_t = (
        0.0
        if iou_threshold is None or not iou_threshold.size
        else float(iou_threshold.reshape(-1)[0])
    )
    has_st = score_threshold is not None and score_threshold.size > 0
    st = float(score_threshold.reshape(-1)[0]) if has_st else 0.0
    out: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], center_point_box)
        for c in range(scores.shape[1]):
            if limit == 0:
                break
            sc = scores[b, c].astype(np.float64)
            cand = np.flatnonzero(sc > st) if has_st else np.arange(sc.size)
            cand = cand[np.argsort(-sc[cand], kind="stable")]
            iou = _iou(corners[cand])
            kept: list[int] = []
            for k in range(cand.size):
                if len(kept) >= limit:
                    break
                if not kept or not (iou[k, kept] > iou_t).any():
                    kept.append(k)
                    out.append((b, c, int(cand[k])))
    return np.array(out, dtype=np.int64).reshape(-1, 3)
