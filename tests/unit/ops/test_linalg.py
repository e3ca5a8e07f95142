"""MatMul, Gemm, Einsum, Det, MatMulInteger, QLinearMatMul (ops/linalg.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from onnxexec.errors import InvalidGraphError
from tests.unit.ops._node import run_node

RNG = np.random.default_rng(1)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("a", "b", "out"),
    [
        ((3, 4), (4, 5), (3, 5)),
        ((2, 3, 4), (4, 5), (2, 3, 5)),
        ((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2)),  # batch broadcast
        ((4,), (2, 4, 5), (2, 5)),  # 1-D A: prepend 1, then drop it
        ((2, 3, 4), (4,), (2, 3)),  # 1-D B: append 1, then drop it
        ((4,), (4,), ()),
        ((0, 4), (4, 3), (0, 3)),
    ],
)
def test_matmul_shapes_match_written_out_product(a, b, out):
    x, y = f32(*a), f32(*b)
    (z,) = run_node("MatMul", [x, y], opset=13)
    assert z.shape == out and z.dtype == np.float32
    # (.., M, K) x (.., K, N) as an explicit sum over K, in float64.
    xa = x.astype(np.float64)[None] if x.ndim == 1 else x.astype(np.float64)
    ya = y.astype(np.float64)[..., None] if y.ndim == 1 else y.astype(np.float64)
    ref = (xa[..., :, :, None] * ya[..., None, :, :]).sum(axis=-2)
    np.testing.assert_allclose(z, ref.reshape(out), rtol=1e-5, atol=1e-5)


def test_matmul_keeps_float16_and_bfloat16():
    x, y = f32(3, 4), f32(4, 2)
    for dt in (np.float16, ml_dtypes.bfloat16):
        (z,) = run_node("MatMul", [x.astype(dt), y.astype(dt)], opset=13)
        assert z.dtype == dt
        ref = x.astype(dt).astype(np.float64) @ y.astype(dt).astype(np.float64)
        np.testing.assert_allclose(z.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_matmul_integer_from_opset_9():
    x = np.array([[1, 2], [3, 4]], np.int32)
    (z,) = run_node("MatMul", [x, x], opset=9)
    assert z.dtype == np.int32 and z.tolist() == [[7, 10], [15, 22]]
    # MatMul-1 is float-only: onnxruntime refuses the model, so do we
    with pytest.raises(InvalidGraphError, match=r"MatMul, opset 1.*tensor\(int32\)"):
        run_node("MatMul", [x, x], opset=1)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (), (5,), (3, 1), (3, 5)])
def test_gemm(trans_a, trans_b, c_shape):
    a, b = f32(3, 4), f32(4, 5)
    ins = [a.T.copy() if trans_a else a, b.T.copy() if trans_b else b]
    c = None if c_shape is None else f32(*c_shape)
    if c is not None:
        ins.append(c)
    (y,) = run_node("Gemm", ins, opset=13, alpha=0.5, beta=2.0, transA=trans_a, transB=trans_b)
    ref = 0.5 * (a.astype(np.float64) @ b) + (0 if c is None else 2.0 * c.astype(np.float64))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_gemm_v6_broadcast_attribute():
    a, b, c = f32(3, 4), f32(4, 5), f32(5)
    (y,) = run_node("Gemm", [a, b, c], opset=6, broadcast=1)
    np.testing.assert_allclose(y, a.astype(np.float64) @ b + c, rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match="broadcast=1"):
        run_node("Gemm", [a, b, f32(3, 1)], opset=6)


def test_gemm_c_must_broadcast_one_way():
    with pytest.raises(Exception, match="broadcast"):
        run_node("Gemm", [f32(1, 4), f32(4, 1), f32(3, 5)], opset=13)


@pytest.mark.parametrize(
    ("equation", "shapes", "ref"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)], lambda a, b: a @ b),
        ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)], lambda a, b: a @ b),
        ("ii->i", [(3, 3)], np.diag),
        ("ij->", [(3, 4)], np.sum),
        ("i,i", [(4,)] * 2, lambda a, b: (a * b).sum()),
        ("ji", [(3, 4)], lambda a: a.T),  # implicit output: sorted letters -> "ij"
        ("Ab,bc->cA", [(3, 4), (4, 5)], lambda a, b: (a @ b).T),
        ("...ij->...ji", [(2, 3, 4)], lambda a: a.swapaxes(-1, -2)),
    ],
)
def test_einsum(equation, shapes, ref):
    ins = [f32(*s) for s in shapes]
    (y,) = run_node("Einsum", ins, opset=12, equation=equation)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref(*[x.astype(np.float64) for x in ins]), rtol=1e-5, atol=1e-5)


def test_det():
    m = np.array([[[2.0, 1.0], [1.0, 3.0]], [[0.0, 1.0], [1.0, 0.0]]], np.float32)
    (y,) = run_node("Det", [m], opset=11)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [2 * 3 - 1 * 1, 0 * 0 - 1 * 1], rtol=1e-6)
    (y,) = run_node("Det", [m[0].astype(np.float16)], opset=22)
    assert y.shape == () and y.dtype == np.float16 and float(y) == 5.0


def test_matmul_integer_zero_points():
    a = np.array([[11, 7, 3], [10, 6, 2], [9, 5, 1], [8, 4, 0]], np.uint8)
    b = np.array([[1, 4], [2, 5], [3, 6]], np.uint8)
    # Operators.md MatMulInteger example: a_zero_point 12, b_zero_point 0.
    (y,) = run_node("MatMulInteger", [a, b, np.array(12, np.uint8)], opset=10)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [[-38, -83], [-44, -98], [-50, -113], [-56, -128]])
    zp_rows = np.array([1, 2, 3, 4], np.uint8)
    zp_cols = np.array([1, 0], np.uint8)
    (y,) = run_node("MatMulInteger", [a, b, zp_rows, zp_cols], opset=10)
    ref = (a.astype(np.int64) - zp_rows[:, None]) @ (b.astype(np.int64) - zp_cols)
    np.testing.assert_array_equal(y, ref)


def test_matmul_integer_int8():
    a = np.array([[-128, 127]], np.int8)
    b = np.array([[127], [-128]], np.int8)
    (y,) = run_node("MatMulInteger", [a, b], opset=10)
    assert y.tolist() == [[-128 * 127 + 127 * -128]]


def test_qlinear_matmul_spec_example():
    # Operators.md QLinearMatMul example (uint8, per-tensor).
    a = np.array([[208, 236, 0, 238], [3, 214, 255, 29]], np.uint8)
    b = np.array([[152, 51, 244], [60, 26, 255], [0, 127, 246], [127, 254, 247]], np.uint8)
    ins = [
        a,
        np.array(0.0066, np.float32),
        np.array(113, np.uint8),
        b,
        np.array(0.00705, np.float32),
        np.array(114, np.uint8),
        np.array(0.0107, np.float32),
        np.array(118, np.uint8),
    ]
    for opset in (10, 21):
        (y,) = run_node("QLinearMatMul", ins, opset=opset)
        assert y.dtype == np.uint8
        np.testing.assert_array_equal(y, [[168, 115, 255], [1, 66, 151]])
