"""Reduce* ops, CumSum and CumProd (ops/reduce.py) at pinned opsets."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.ops._node import run_node

RNG = np.random.default_rng(0)
X = (RNG.random((2, 3, 4)) + 0.5).astype(np.float32)  # positive: every op is defined


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


# numpy formulas written out, float64, then cast.
REF = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: np.log(np.sum(np.exp(x), axis=a, keepdims=k)),
}
AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in REF}


@pytest.mark.parametrize("op", sorted(REF))
@pytest.mark.parametrize(("axes", "keepdims"), [((1,), 1), ((0, -1), 0), (None, 1), (None, 0)])
def test_reduce_axes_input(op, axes, keepdims):
    ins = [X] if axes is None else [X, i64(*axes)]
    (y,) = run_node(op, ins, opset=AXES_INPUT_SINCE[op], keepdims=keepdims)
    expected = REF[op](X.astype(np.float64), axes, bool(keepdims))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-5)


@pytest.mark.parametrize("op", sorted(REF))
def test_reduce_axes_attribute_old_opset(op):
    opset = AXES_INPUT_SINCE[op] - 1
    (y,) = run_node(op, [X], opset=opset, axes=[-2], keepdims=0)
    np.testing.assert_allclose(y, REF[op](X.astype(np.float64), (1,), False), rtol=1e-5)
    (y,) = run_node(op, [X], opset=1)  # no axes attribute: all axes, keepdims=1
    assert y.shape == (1, 1, 1)


@pytest.mark.parametrize(
    ("op", "identity"),
    [
        ("ReduceSum", 0.0),
        ("ReduceProd", 1.0),
        ("ReduceMax", -np.inf),
        ("ReduceMin", np.inf),
        ("ReduceL1", 0.0),
        ("ReduceL2", 0.0),
        ("ReduceSumSquare", 0.0),
        ("ReduceLogSum", -np.inf),
        ("ReduceLogSumExp", -np.inf),
    ],
)
def test_reduce_empty_set_gives_identity(op, identity):
    empty = np.zeros((2, 0, 4), np.float32)
    (y,) = run_node(op, [empty, i64(1)], opset=AXES_INPUT_SINCE[op])
    assert y.shape == (2, 1, 4)
    np.testing.assert_array_equal(y, np.full((2, 1, 4), identity, np.float32))


def test_reduce_empty_set_integer_and_bool_identities():
    (y,) = run_node("ReduceMax", [np.zeros((0, 2), np.int32), i64(0)], opset=20, keepdims=0)
    assert y.tolist() == [np.iinfo(np.int32).min] * 2
    (y,) = run_node("ReduceMin", [np.zeros((0, 2), bool), i64(0)], opset=20, keepdims=0)
    assert y.tolist() == [True, True]


def test_reduce_sum_non_reduced_zero_axis():
    (y,) = run_node("ReduceSum", [np.zeros((0, 3), np.float32), i64(1)], opset=13, keepdims=1)
    assert y.shape == (0, 1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_reduce_noop_with_empty_axes_returns_input(op):
    (y,) = run_node(
        op, [X, np.zeros(0, np.int64)], opset=AXES_INPUT_SINCE[op], noop_with_empty_axes=1
    )
    np.testing.assert_array_equal(y, X)
    (y,) = run_node(op, [X], opset=AXES_INPUT_SINCE[op], noop_with_empty_axes=1)
    np.testing.assert_array_equal(y, X)


def test_reduce_noop_composite_ops_apply_elementwise_step():
    # Operators.md ReduceSumSquare-18: "ReduceSumSquare returns the Square of the input".
    x = np.array([-2.0, 3.0], np.float32)
    noop = {"noop_with_empty_axes": 1}
    assert run_node("ReduceSumSquare", [x], opset=18, **noop)[0].tolist() == [4.0, 9.0]
    assert run_node("ReduceL1", [x], opset=18, **noop)[0].tolist() == [2.0, 3.0]


def test_reduce_empty_axes_without_noop_reduces_everything():
    (y,) = run_node("ReduceSum", [X, np.zeros(0, np.int64)], opset=13, keepdims=0)
    assert y.shape == ()
    np.testing.assert_allclose(y, X.astype(np.float64).sum(), rtol=1e-6)


def test_reduce_keeps_integer_and_float16_dtypes():
    xi = np.array([[1, 2], [3, 4]], np.int32)
    (y,) = run_node("ReduceSum", [xi, i64(0)], opset=13)
    assert y.dtype == np.int32 and y.tolist() == [[4, 6]]
    xh = X.astype(np.float16)
    (y,) = run_node("ReduceMean", [xh], opset=18, keepdims=0)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y, xh.astype(np.float64).mean(), rtol=1e-3)


def test_reduce_max_bool():
    x = np.array([[True, False], [False, False]])
    (y,) = run_node("ReduceMax", [x, i64(1)], opset=20, keepdims=0)
    assert y.tolist() == [True, False]


def test_reduce_log_sum_exp_is_stable():
    x = np.array([1000.0, 1000.0], np.float32)
    (y,) = run_node("ReduceLogSumExp", [x], opset=18, keepdims=0)
    np.testing.assert_allclose(y, 1000 + np.log(2), rtol=1e-6)


# --- CumSum / CumProd ------------------------------------------------------------------

C = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


@pytest.mark.parametrize(
    ("exclusive", "reverse", "sums", "prods"),
    [
        (0, 0, [1, 3, 6, 10], [1, 2, 6, 24]),
        (1, 0, [0, 1, 3, 6], [1, 1, 2, 6]),
        (0, 1, [10, 9, 7, 4], [24, 24, 12, 4]),
        (1, 1, [9, 7, 4, 0], [24, 12, 4, 1]),
    ],
)
def test_cumsum_cumprod_flags(exclusive, reverse, sums, prods):
    axis = np.array(0, np.int32)
    kw = {"exclusive": exclusive, "reverse": reverse}
    assert run_node("CumSum", [C, axis], opset=14, **kw)[0].tolist() == sums
    assert run_node("CumProd", [C, axis], opset=26, **kw)[0].tolist() == prods


def test_cumsum_axis_and_int_dtype():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    (y,) = run_node("CumSum", [x, np.array(-1, np.int64)], opset=11)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [[0, 1, 3], [3, 7, 12]])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize(
    ("axes", "keepdims"), [([2, 3], 1), ([-1], 0), ([1, 2, 3], 0), ([1, 3], 1)]
)
def test_big_trailing_sums_match_float64_numpy(op, axes, keepdims) -> None:
    # tensors past ops/reduce.FAST_MIN take the compiled row-sum path when the axes
    # are the trailing ones (a global average pool); [1, 3] is not, and stays in numpy
    x = RNG.standard_normal((2, 640, 7, 7)).astype(np.float32)
    x[1, 5, 3, 3] = np.nan  # NaN still propagates
    (y,) = run_node(op, [x, i64(*axes)], opset=18, keepdims=keepdims)
    want = REF[op](x.astype(np.float64), tuple(axes), bool(keepdims))
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_float32_sums_overflow_only_when_the_true_sum_does(op):
    # A float32 accumulator overflows partial sums by summation order (numpy's pairwise
    # order gives -inf for the first row); the true sums fit float32, and the fused norm
    # kernels use exactly that rule, so every optimization level agrees. Oracle: float64.
    rows = [
        # numpy's float32 pairwise sum adds x[0] and x[8] first: inf; the true sum 3e38
        [3e38, -3e38, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3e38, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        [3e38, 3e38] + [0.0] * 14,  # true sum 6e38: +inf
        [1e20, -1e20, 2.5] + [0.0] * 13,
    ]
    x = np.array(rows, np.float32)
    (y,) = run_node(op, [x, i64(-1)], keepdims=0)
    exact = x.astype(np.float64).sum(axis=-1)
    want = exact.astype(np.float32)  # inf where the true sum leaves float32's range
    if op == "ReduceMean":
        want = want / np.float32(x.shape[-1])
    np.testing.assert_allclose(y, want, rtol=1e-6)
    assert np.isinf(y[1]) and np.isfinite(y[0]) and np.isfinite(y[2])
