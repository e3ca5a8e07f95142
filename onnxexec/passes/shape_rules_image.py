"""Shape rules for the ops that reshape images between convolutions: Pad, Resize,
Upsample, DepthToSpace, SpaceToDepth (formulas from each op's section of Operators.md).

Without them every value after such an op had no element type, so the fusions that
ask "is this float32?" skipped the Conv reading it (issue 26: a Conv after an explicit
Pad or after a Resize stayed an unfused, unpacked numpy Conv)."""

from __future__ import annotations

import numpy as np

from onnxexec.ops.common import norm_axis
from onnxexec.passes import symdim
from onnxexec.passes.shape_inference import Facts, rule
from onnxexec.passes.symdim import Dim


def _fresh_rank(x: Facts) -> Facts:
    """x's element type, and its rank with every dimension unknown."""
    if x.shape is None:
        return Facts(x.elem)
    return Facts(x.elem, tuple(symdim.fresh() for _ in x.shape))


def _grow(d: Dim, before: int, after: int) -> Dim:
    if before == 0 and after == 0:
        return d
    if isinstance(d, int):
        return d + before + after
    return symdim.fresh()


@rule("Pad")
def _pad(n, ins):
    """out[i] = in[i] + pads[i] + pads[i + r] on the padded axes (negative pads crop)."""
    x = ins[0]
    if "pads" in n.attrs or "paddings" in n.attrs:  # opsets 1-10: an attribute
        pads = tuple(n.attrs.get("pads", n.attrs.get("paddings", ())))
        axes: tuple[int, ...] | None = None
    else:
        pads = ins[1].ints() if len(ins) > 1 else None
        axes = ins[3].ints() if len(ins) > 3 and n.inputs[3] else None
        if len(ins) > 3 and n.inputs[3] and axes is None:
            return [_fresh_rank(x)]
    if x.shape is None or pads is None:
        return [_fresh_rank(x)]
    r = len(x.shape)
    ax = [norm_axis(a, r) for a in axes] if axes is not None else list(range(r))
    if len(pads) != 2 * len(ax):
        return [_fresh_rank(x)]
    shape = list(x.shape)
    k = len(ax)
    for i, a in enumerate(ax):
        shape[a] = _grow(shape[a], int(pads[i]), int(pads[i + k]))
    return [Facts(x.elem, tuple(shape))]


def _scaled(d: Dim, s: float) -> Dim:
    # floor(d * scale), the spec's output size (and ops/resize.py's)
    if s == 1.0:
        return d
    if isinstance(d, int):
        return int(np.floor(d * s))
    return symdim.fresh()


def _floats(f: Facts) -> tuple[float, ...] | None:
    if f.value is None or f.value.dtype.kind != "f" or f.value.ndim > 1:
        return None
    return tuple(float(v) for v in f.value.reshape(-1))


@rule("Resize", "Upsample")
def _resize(n, ins):
    x = ins[0]
    if x.shape is None:
        return [Facts(x.elem)]
    r = len(x.shape)
    if "scales" in n.attrs:  # Upsample-7: an attribute
        scales: tuple[float, ...] | None = tuple(n.attrs["scales"])
        sizes = None
    elif len(n.inputs) == 2:  # Resize-10 / Upsample-9: (X, scales)
        scales, sizes = _floats(ins[1]), None
    else:  # Resize-11+: (X, roi, scales, sizes)
        if n.attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
            return [_fresh_rank(x)]  # the size also depends on the roi
        has_sizes = len(ins) > 3 and n.inputs[3]
        sizes = ins[3].ints() if has_sizes else None
        scales = _floats(ins[2]) if len(ins) > 2 and n.inputs[2] and not has_sizes else None
        if has_sizes and sizes is None:
            return [_fresh_rank(x)]
    axes = tuple(norm_axis(a, r) for a in n.attrs.get("axes") or range(r))
    shape = list(x.shape)
    if sizes is not None:
        if len(sizes) != len(axes) or n.attrs.get("keep_aspect_ratio_policy", "stretch") not in (
            "stretch",
        ):
            return [_fresh_rank(x)]
        for a, s in zip(axes, sizes, strict=True):
            shape[a] = int(s)
        return [Facts(x.elem, tuple(shape))]
    if scales is None or len(scales) != len(axes):
        return [_fresh_rank(x)]
    for a, s in zip(axes, scales, strict=True):
        shape[a] = _scaled(shape[a], s)
    return [Facts(x.elem, tuple(shape))]


@rule("DepthToSpace", "SpaceToDepth")
def _depth_space(n, ins):
    """(N, C, H, W) -> (N, C/b^2, H*b, W*b), or back for SpaceToDepth."""
    x = ins[0]
    b = n.attrs.get("blocksize")
    if x.shape is None or len(x.shape) != 4 or not isinstance(b, int) or b < 1:
        return [_fresh_rank(x)]
    nn_, c, h, w = x.shape
    if n.op_type == "DepthToSpace":
        dims = (symdim.div(c, b * b), symdim.mul(h, b), symdim.mul(w, b))
    else:
        dims = (symdim.mul(c, b * b), symdim.div(h, b), symdim.div(w, b))
    return [Facts(x.elem, (nn_, *(d if d is not None else symdim.fresh() for d in dims)))]
