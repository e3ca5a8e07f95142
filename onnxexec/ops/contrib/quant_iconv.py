"""QLinearConv and ConvInteger of one group on the integer GEMM (quant_igemm.py).

The input becomes im2col rows, padded with x's zero point so a pad tap adds
(zx - zx) * w = 0 as the spec's zero padding of the shifted input does: for 2-D convs
rows (N OH OW, KH KW C) gathered from x transposed to NHWC by a numba kernel
(kernels/linalg/igemm.py `im2col_nhwc`), so each tap copies C contiguous bytes; other
ranks (N O..., C K...) through numpy's strided windows. The weight is packed once,
by the node's prepare hook, as the matching (KH KW C, M) or (C K..., M) matrix. The
product's rows are written straight back to (N, M, O...) by the finish kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.kernels.objload import lazy_module
from onnxexec.native.parallel import parallel_for
from onnxexec.ops import _window as win
from onnxexec.ops.contrib.quant_igemm import PackedInt8, Product, weight_fits

# imported at first use: igemm's tiles are numba intrinsics, so importing it imports
# numba, which a model without 8-bit ops must not pay for (kernels/objload)
igemm = lazy_module("onnxexec.kernels.linalg.igemm")


def _wmat(w: np.ndarray) -> np.ndarray:
    """The (M, K) weight rows in the im2col column order: (KH, KW, C) for 2-D convs."""
    if w.ndim == 4:
        return w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)
    return w.reshape(w.shape[0], -1)


def conv_weight_fits(w: np.ndarray, zero_point: np.ndarray | None, group: int) -> bool:
    """Whether the integer GEMM takes this conv weight: one group, 8-bit, zero point per
    tensor or per output channel."""
    if group != 1 or w.ndim < 3:
        return False
    return weight_fits(w.reshape(w.shape[0], -1), zero_point, trans=True)


def conv_packer(w_at: int, zp_at: int) -> Callable[..., Any]:
    """A `prepare` hook (ops/registry.py) packing the node's constant conv weight."""

    def prepare(consts: tuple[Any, ...], attrs: dict[str, Any]) -> PackedInt8 | None:
        w = consts[w_at] if len(consts) > w_at else None
        zp = consts[zp_at] if len(consts) > zp_at else None
        if not isinstance(w, np.ndarray) or not conv_weight_fits(w, zp, attrs.get("group", 1)):
            return None
        return PackedInt8(_wmat(w), zp, trans=True, source=w)

    return prepare


def _rows(x: np.ndarray, zx: int, g: win.Geometry) -> np.ndarray:
    """im2col: (N prod(O), C prod(K)) of x padded with its zero point."""
    n = len(g.kernel)
    if (
        all(k == 1 for k in g.kernel)
        and all(s == 1 for s in g.strides)
        and not any(g.pads_begin + g.pads_end)
    ):
        # 1x1, stride 1, no pads: the rows are x's channels per position
        return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    wv = win.windows(win.padded(x, g, zx), g)  # (N, C, O..., K...)
    order = (0, *range(2, 2 + n), 1, *range(2 + n, 2 + 2 * n))
    rows = math.prod(g.out) * x.shape[0]
    cols = x.shape[1] * math.prod(g.kernel)
    return np.ascontiguousarray(wv.transpose(order)).reshape(rows, cols)


def _product(x: np.ndarray, x_zero: np.ndarray | None, pw: PackedInt8, g: win.Geometry) -> Product:
    """x's im2col rows times the packed weight."""
    zx = 0 if x_zero is None else int(np.asarray(x_zero).reshape(-1)[0])
    if x.ndim != 4:
        return Product.of(_rows(x, zx, g), pw, x_zero)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    if x.dtype == np.int8:  # to the uint8 codes igemm multiplies (+128, as _a_codes)
        xh = xh.view(np.uint8) ^ np.uint8(0x80)
        zx += 128
    m, c = x.shape[0] * math.prod(g.out), x.shape[1]
    lda = -(-pw.k // 4) * 4
    one = all(k == 1 for k in g.kernel) and g.strides == (1, 1) and not any(g.pads_begin)
    if one and lda == c:
        return Product(xh.reshape(-1), lda, m, zx, pw)  # 1x1: the rows are x's pixels
    flat = np.empty(m * lda, np.uint8)
    geo = np.array([*g.kernel, *g.strides, *g.dilations, *g.pads_begin, *g.out], np.int64)

    def rows(p0: int, p1: int) -> None:
        igemm.im2col_nhwc(xh, zx, geo, flat, lda, p0, p1)

    parallel_for(rows, m, min_chunk=256)
    return Product(flat, lda, m, zx, pw)


def packed_conv(
    prepared: PackedInt8 | None, w: np.ndarray, w_zero: np.ndarray | None
) -> PackedInt8:
    """The plan's packed weight when this call's W is the one packed, else W packed now."""
    if prepared is not None and prepared.owns(w, w_zero):
        return prepared
    return PackedInt8(_wmat(w), w_zero, trans=True, source=w)


def qlinear_conv_igemm(
    x: np.ndarray,
    x_zero: np.ndarray | None,
    pw: PackedInt8,
    g: win.Geometry,
    b: np.ndarray | None,
    mult: np.ndarray,
    y_zero: int,
    out_dt: np.dtype,
) -> np.ndarray:
    """QLinearConv's output (N, M, O...): QuantizeLinear(float32(acc + b) * mult, y_zero)."""
    pr = _product(x, x_zero, pw, g)
    out = np.empty((x.shape[0], pw.n, math.prod(g.out)), out_dt)
    pr.requant(b, mult, y_zero, out)
    return out.reshape(x.shape[0], pw.n, *g.out)


def conv_integer_igemm(
    x: np.ndarray, x_zero: np.ndarray | None, pw: PackedInt8, g: win.Geometry
) -> np.ndarray:
    """ConvInteger's int32 output (N, M, O...)."""
    pr = _product(x, x_zero, pw, g)
    y = pr.int32().reshape(x.shape[0], math.prod(g.out), pw.n)
    return np.ascontiguousarray(y.transpose(0, 2, 1)).reshape(x.shape[0], pw.n, *g.out)
