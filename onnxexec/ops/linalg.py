"""Linear algebra: MatMul, Gemm, Einsum, Det, MatMulInteger, QLinearMatMul.

float32/float64 go straight to BLAS through np.matmul, without upcasting. float16 and
bfloat16 (no BLAS kernels) are computed in float32 and cast back, as onnxruntime's CPU
kernels accumulate in float32. Integer products run as float64 BLAS: exact while every
dot product stays below 2**53, far beyond int8 x int8 sums.
"""

from __future__ import annotations

import numpy as np

from onnxexec.ops.contrib.quant_igemm import PackedInt8, fits, int8_matmul, packed_for, packer
from onnxexec.ops.quant import is_integer, saturate, to_float
from onnxexec.ops.registry import op

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))


def _low_precision(dt: np.dtype) -> bool:
    return dt == np.float16 or dt.kind == "V"


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul keeping the input dtype; fp16/bf16 via float32."""
    if a.dtype in _BLAS and b.dtype == a.dtype:
        return np.matmul(a, b)
    if _low_precision(a.dtype):
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b)


@op("MatMul", since=1)
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul: batched, broadcast, 1-D operands promoted then squeezed."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("MatMul: operands must have rank >= 1")
    return _matmul(a, b)


def _gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None,
    alpha: float,
    beta: float,
    trans_a: int,
    trans_b: int,
) -> np.ndarray:
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"Gemm: A and B must be 2-D, got ranks {a.ndim} and {b.ndim}")
    dt = a.dtype
    work = np.dtype(np.float32) if _low_precision(dt) else dt
    aa = (a.T if trans_a else a).astype(work, copy=False)
    bb = (b.T if trans_b else b).astype(work, copy=False)
    if aa.shape[1] != bb.shape[0]:
        raise ValueError(f"Gemm: A' {list(aa.shape)} and B' {list(bb.shape)} do not multiply")
    y = np.matmul(aa, bb)  # fresh array: safe to scale in place
    if alpha != 1.0:
        if work.kind == "f":
            y *= work.type(alpha)
        else:
            y = (y * alpha).astype(work)
    if c is not None and beta != 0.0:
        cc = np.asarray(c).astype(work, copy=False)
        if beta != 1.0:
            cc = (cc * beta).astype(work) if work.kind != "f" else cc * work.type(beta)
        # Unidirectional broadcast: C must broadcast to (M, N), never the reverse.
        y += np.broadcast_to(cc, y.shape)
    return y.astype(dt, copy=False)


@op("Gemm", since=7)
def gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    transA: int = 0,
    transB: int = 0,
) -> np.ndarray:
    """alpha * A' @ B' + beta * C, A' (M, K), B' (K, N), C broadcastable to (M, N)."""
    return _gemm(a, b, c, alpha, beta, transA, transB)


@op("Gemm", since=1)
def gemm_v1(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    broadcast: int = 0,
    transA: int = 0,
    transB: int = 0,
) -> np.ndarray:
    """Opsets 1-6: C required, and must already be (M, N) unless broadcast=1."""
    if not broadcast and c is not None and np.ndim(c) == 2:
        m = a.shape[1] if transA else a.shape[0]
        n = b.shape[0] if transB else b.shape[1]
        if tuple(c.shape) != (m, n):
            raise ValueError(f"Gemm-1: C {list(c.shape)} must be {[m, n]} without broadcast=1")
    return _gemm(a, b, c, alpha, beta, transA, transB)


@op("Einsum", since=12)
def einsum(*inputs: np.ndarray, equation: str) -> np.ndarray:
    """numpy.einsum with the ONNX equation (spaces allowed); fp16/bf16 via float32."""
    eq = equation.replace(" ", "")
    if not inputs:
        raise ValueError("Einsum: no inputs")
    dt = inputs[0].dtype
    if _low_precision(dt):
        ops = [x.astype(np.float32) for x in inputs]
        return np.asarray(np.einsum(eq, *ops, optimize=len(ops) > 1)).astype(dt)
    return np.asarray(np.einsum(eq, *inputs, optimize=len(inputs) > 1), dtype=dt)


@op("Det", since=11)
def det(x: np.ndarray) -> np.ndarray:
    """Determinant of (*, M, M) -> (*)."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"Det: input {list(x.shape)} is not a (batch of) square matrix")
    work = np.float32 if _low_precision(x.dtype) else x.dtype
    return np.asarray(np.linalg.det(x.astype(work, copy=False))).astype(x.dtype)


def _centered(x: np.ndarray, zp: np.ndarray | None, per_row: bool) -> np.ndarray:
    """float64 (x - zero_point); a 1-D zero point is per row of x (per_row) or per column."""
    xf = to_float(x).astype(np.float64)
    if zp is None:
        return xf
    z = to_float(np.asarray(zp)).astype(np.float64)
    if per_row and z.ndim == 1 and z.size > 1 and x.ndim >= 2:
        z = z.reshape(-1, 1)  # [M] -> [M, 1]: one zero point per row of A
    return xf - z


def _int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer product of float64 operands holding integers, as int64."""
    return np.rint(np.matmul(a, b)).astype(np.int64)


@op("MatMulInteger", since=10, prepare=packer(1, 3))
def matmul_integer(
    a: np.ndarray,
    b: np.ndarray,
    a_zero_point: np.ndarray | None = None,
    b_zero_point: np.ndarray | None = None,
    *,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """int32 (A - a_zero_point) @ (B - b_zero_point).

    Zero points are per tensor, per row of A ([M] or [..., M, 1]) or per column of B.
    A 2-D weight runs on the integer GEMM (ops/contrib/quant_igemm.py), packed once.
    """
    if fits(a, b, a_zero_point, b_zero_point):
        return int8_matmul(a, packed_for(prepared, b, b_zero_point), a_zero_point)
    y = _int_matmul(_centered(a, a_zero_point, True), _centered(b, b_zero_point, False))
    return y.astype(np.int32)  # wraps modulo 2**32: "accumulation may overflow in 32 bits"


def _per_row_scale(s: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = np.asarray(s)
    return s.reshape(-1, 1) if s.ndim == 1 and s.size > 1 and x.ndim >= 2 else s


@op("QLinearMatMul", since=10, prepare=packer(3, 5))
def qlinear_matmul(
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
    *,
    prepared: PackedInt8 | None = None,
) -> np.ndarray:
    """Quantized matmul: saturate(round((A-za)(B-zb) * sa*sb/sy) + zy) in y_zero_point's type.

    The requantization multiplier sa*sb/sy is formed in the scales' own type (float32 or
    float16), then applied to the exact integer product.
    """
    if fits(a, b, a_zero_point, b_zero_point):
        pw = packed_for(prepared, b, b_zero_point)
        acc = int8_matmul(a, pw, a_zero_point).astype(np.float64)
    else:
        acc = np.matmul(_centered(a, a_zero_point, True), _centered(b, b_zero_point, False))
    sa = _per_row_scale(a_scale, a)
    multiplier = (sa * np.asarray(b_scale)) / _per_row_scale(y_scale, acc)
    y = acc * to_float(multiplier).astype(np.float64)
    out_dt = np.asarray(y_zero_point).dtype
    zy = to_float(np.asarray(y_zero_point)).astype(np.float64)
    zy = zy.reshape(-1, 1) if zy.ndim == 1 and zy.size > 1 else zy
    if is_integer(out_dt):
        return saturate(np.rint(y) + zy, out_dt)
    return saturate(y + zy, out_dt)
