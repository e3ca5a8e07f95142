"""com.microsoft QLinearConv: ai.onnx QLinearConv plus `channels_last` (NHWC x and y),
the form onnxruntime's NHWC layout transformer produces (ContribOperators.md)."""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.contrib.quant_iconv import conv_packer
from onnxexec.ops.contrib.quant_igemm import PackedInt8
from onnxexec.ops.conv import qlinear_conv
from onnxexec.ops.registry import op


@op("QLinearConv", since=1, domain=MS_DOMAIN, prepare=conv_packer(3, 5))
def ms_qlinear_conv(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray,
    w: np.ndarray,
    w_scale: np.ndarray,
    w_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    channels_last: int = 0,
    dilations: tuple[int, ...] | None = None,
    group: int = 1,
    kernel_shape: tuple[int, ...] | None = None,
    pads: tuple[int, ...] | None = None,
    strides: tuple[int, ...] | None = None,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """x (N, C, D...) or, with channels_last, (N, D..., C) -> y in the same layout."""
    if channels_last:
        x = np.ascontiguousarray(np.moveaxis(x, -1, 1))
    y = qlinear_conv(
        x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, b,
        auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
        pads=pads, strides=strides, prepared=prepared,
    )  # fmt: skip
    return np.ascontiguousarray(np.moveaxis(y, 1, -1)) if channels_last else y
