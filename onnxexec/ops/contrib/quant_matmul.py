"""com.microsoft quantized matmuls: QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul.

Integer products are exact: a 2-D 8-bit weight goes through the integer GEMM
(ops/contrib/quant_igemm.py, packed once by the node's prepare hook); other shapes
run the zero-point-shifted operands through float32 BLAS in K-slices whose sums stay
below 2^24 (exact_int_matmul), or float64 (exact for K below 2^37); the result is
then scaled in float32 as onnxruntime's MLAS output processors do
(ContribOperators.md QGemm / MatMulIntegerToFloat / DynamicQuantizeMatMul).
"""

from __future__ import annotations

import numpy as np

from onnxexec.native.parallel import parallel_for
from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.contrib.quant_igemm import PackedInt8, fits, int8_matmul, packed_for, packer
from onnxexec.ops.quant import dynamic_quantize_linear
from onnxexec.ops.registry import op


def centered(x: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
    """float64 x - zero_point; a 1-D zero point is per column (the last axis)."""
    xf = x.astype(np.float64)
    if zero_point is None:
        return xf
    z = np.asarray(zero_point).astype(np.float64)
    return xf - (z.reshape(-1)[0] if z.size == 1 else z)


def _scale(s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, np.float32)
    return s.reshape(()) if s.size == 1 else s


def _span(x: np.ndarray, zero_point: np.ndarray | None) -> float:
    """The largest |x - zero_point| x's 8-bit type allows (a bound, not a scan)."""
    info = np.iinfo(x.dtype)
    z = 0.0 if zero_point is None else np.asarray(zero_point).astype(np.float64)
    return float(np.max(np.maximum(np.abs(info.max - z), np.abs(info.min - z))))


def exact_int_matmul(
    a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None, b_zero_point: np.ndarray | None
) -> np.ndarray:
    """float32 (A - za) @ (B - zb), exact: float32 BLAS over K-slices short enough that
    every partial sum stays below 2^24 (integers are exact there), slices summed in
    float64 when K needs more than one (then rounded once to float32)."""
    ac = a.astype(np.float32)
    if a_zero_point is not None:
        ac -= np.float32(np.asarray(a_zero_point).reshape(-1)[0])
    bc = b.astype(np.float32)
    if b_zero_point is not None:  # 8-bit codes minus zero points are exact in float32
        zb = np.asarray(b_zero_point).astype(np.float32)
        bc -= zb.reshape(-1)[0] if zb.size == 1 else zb
    k, n = bc.shape
    step = max(1, int((1 << 24) // max(_span(a, a_zero_point) * _span(b, b_zero_point), 1.0)))
    rows = ac.reshape(-1, k)
    out = np.empty((rows.shape[0], n), np.float32)

    def columns(c0: int, c1: int) -> None:  # numpy's matmul releases the GIL
        if k <= step:
            np.matmul(rows, bc[:, c0:c1], out=out[:, c0:c1])
            return
        acc = np.matmul(rows[:, :step], bc[:step, c0:c1]).astype(np.float64)
        for k0 in range(step, k, step):
            acc += np.matmul(rows[:, k0 : k0 + step], bc[k0 : k0 + step, c0:c1])
        out[:, c0:c1] = acc

    # BLAS runs one thread under the session (runtime/threads.py): split the columns
    parallel_for(columns, n, min_chunk=128 if rows.shape[0] > 1 else 1024)
    return out.reshape(*a.shape[:-1], n)


def _qgemm_float64(
    a: np.ndarray,
    b: np.ndarray,
    a_zero_point: np.ndarray | None,
    b_zero_point: np.ndarray | None,
    trans_a: int,
    trans_b: int,
) -> np.ndarray:
    """(A - za)(B - zb) in float64 (exact), either operand transposed."""
    af = centered(a, a_zero_point)
    bz = None if b_zero_point is None else np.asarray(b_zero_point)
    if trans_a:
        af = af.T
    if trans_b:
        bf = b.astype(np.float64)
        if bz is not None:
            bf -= bz.reshape(-1, 1) if bz.size > 1 else bz.reshape(-1)[0]
        bf = bf.T
    else:
        bf = centered(b, bz)
    return np.matmul(af, bf)


def int_matmul_to_float(
    a: np.ndarray,
    b: np.ndarray,
    a_scale: np.ndarray,
    b_scale: np.ndarray,
    a_zero_point: np.ndarray | None,
    b_zero_point: np.ndarray | None,
    bias: np.ndarray | None,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """float32 ((A - za) @ (B - zb)) * (sa * sb) + bias; sb / zb per column of B allowed."""
    if fits(a, b, a_zero_point, b_zero_point):
        mult = _scale(a_scale) * _scale(b_scale)  # float32, formed first as below
        pw = packed_for(prepared, b, b_zero_point)
        return int8_matmul(a, pw, a_zero_point, mult, bias)
    if np.asarray(a_zero_point if a_zero_point is not None else 0).size == 1 and b.ndim == 2:
        acc = exact_int_matmul(a, b, a_zero_point, b_zero_point)
    else:
        acc = np.matmul(centered(a, a_zero_point), centered(b, b_zero_point)).astype(np.float32)
    y = acc * (_scale(a_scale) * _scale(b_scale))
    if bias is not None:
        y += bias.astype(np.float32)
    return y


@op("MatMulIntegerToFloat", since=1, domain=MS_DOMAIN, prepare=packer(1, 5))
def matmul_integer_to_float(
    a: np.ndarray,
    b: np.ndarray,
    a_scale: np.ndarray,
    b_scale: np.ndarray,
    a_zero_point: np.ndarray | None = None,
    b_zero_point: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """u8/i8 A (..., M, K) @ u8/i8 B (..., K, N) -> float32 (..., M, N), dequantized."""
    return int_matmul_to_float(a, b, a_scale, b_scale, a_zero_point, b_zero_point, bias, prepared)


@op("DynamicQuantizeMatMul", since=1, domain=MS_DOMAIN, prepare=packer(1, 3))
def dynamic_quantize_matmul(
    a: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    *,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """float32 A is quantized to uint8 as DynamicQuantizeLinear does (one scale over all
    of A), then multiplied with the 8-bit B as MatMulIntegerToFloat."""
    qa, sa, za = dynamic_quantize_linear(a.astype(np.float32, copy=False))
    return int_matmul_to_float(qa, b, sa, b_scale, za, b_zero_point, bias, prepared)


@op("QGemm", since=1, domain=MS_DOMAIN, prepare=packer(3, 5, "transB"))
def qgemm(
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray,
    c: np.ndarray | None = None,
    y_scale: np.ndarray | None = None,
    y_zero_point: np.ndarray | None = None,
    *,
    alpha: float = 1.0,
    transA: int = 0,
    transB: int = 0,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """alpha * (A - za)(B - zb) * sa * sb with the int32 C added to the integer product;
    float32 out, or requantized to (y_scale, y_zero_point) when y_scale is given."""
    bt = b.T if transB else b  # a view: identity checks use b itself
    if not transA and fits(a, bt, a_zero_point, b_zero_point):
        pw = packed_for(prepared, b, b_zero_point, bool(transB))
        acc = int8_matmul(a, pw, a_zero_point).astype(np.float64)
    else:
        acc = _qgemm_float64(a, b, a_zero_point, b_zero_point, transA, transB)
    if c is not None:
        acc = acc + c.astype(np.float64)
    multiplier = np.float32(alpha) * _scale(a_scale) * _scale(b_scale)
    if y_scale is None:
        return acc.astype(np.float32) * multiplier
    out_dt = a.dtype if y_zero_point is None else np.asarray(y_zero_point).dtype
    zy = 0 if y_zero_point is None else int(np.asarray(y_zero_point).reshape(-1)[0])
    real = acc.astype(np.float32) * (multiplier / _scale(y_scale))
    info = np.iinfo(out_dt)
    return np.clip(np.rint(real) + zy, info.min, info.max).astype(out_dt)
