"""Elementwise math and logic ops (ops/elementwise.py, math.py, logic.py).

Each test builds a one-node model at a pinned opset and checks values written out by
hand or with plain numpy/math, plus dtype. Old-opset versions get their own cases.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

from onnxexec.errors import NodeExecutionError
from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.runtime.session import InferenceSession


def run(op_type: str, inputs: list, opset: int, **attrs) -> np.ndarray:
    """Run one `op_type` node on `inputs` (None = omitted optional input)."""
    names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    infos = [
        helper.make_tensor_value_info(n, onnx_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs, strict=True)
        if x is not None
    ]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph([node], "t", infos, [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: x for n, x in zip(names, inputs, strict=True) if x is not None}
    return InferenceSession(model).run(None, feeds)[0]


# --- Div / Mod / Pow -------------------------------------------------------------


def test_elementwise_div_integer_truncates_toward_zero():
    a = np.array([-7, 7, -7, 7, -6, 0], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, -5], dtype=np.int32)
    y = run("Div", [a, b], 14)
    # C semantics: trunc(-3.5) = -3 (numpy's // would give -4).
    np.testing.assert_array_equal(y, np.array([-3, 3, 3, -3, -2, 0], dtype=np.int32))
    assert y.dtype == np.int32


def test_elementwise_div_int64_extremes_and_unsigned():
    a = np.array([-(2**62) - 1, 2**62 + 1], dtype=np.int64)
    y = run("Div", [a, np.array([2, -2], dtype=np.int64)], 14)
    np.testing.assert_array_equal(y, [-(2**61), -(2**61)])
    y = run("Div", [np.array([255, 7], np.uint8), np.array([2, 2], np.uint8)], 14)
    np.testing.assert_array_equal(y, np.array([127, 3], np.uint8))


def test_elementwise_div_float16_keeps_dtype():
    y = run("Div", [np.array([1, 3], np.float16), np.array([3, 0], np.float16)], 14)
    assert y.dtype == np.float16
    assert y[0] == np.float16(1 / 3) and np.isposinf(y[1])


def test_elementwise_add_v1_legacy_broadcast_axis():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([10, 20, 30], dtype=np.float32)
    y = run("Add", [a, b], 1, broadcast=1, axis=1)
    np.testing.assert_array_equal(y, a + b.reshape(1, 3, 1))
    # Without axis B aligns with A's trailing dims.
    b4 = np.array([1, 2, 3, 4], dtype=np.float32)
    np.testing.assert_array_equal(run("Sub", [a, b4], 6, broadcast=1), a - b4)


def test_elementwise_add_v6_without_broadcast_requires_equal_shapes():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(NodeExecutionError, match="broadcast=0"):
        run("Add", [a, np.ones(3, np.float32)], 6)
    # From opset 7 the same inputs broadcast numpy-style.
    np.testing.assert_array_equal(run("Add", [a, np.ones(3, np.float32)], 7), a + 1)


def test_elementwise_div_v1_legacy_scalar_broadcast():
    a = np.array([[2, 4], [6, 8]], dtype=np.float32)
    y = run("Div", [a, np.array([2], np.float32)], 1, broadcast=1)
    np.testing.assert_array_equal(y, a / 2)


def test_elementwise_mod_integer_sign_of_divisor_and_fmod():
    a = np.array([-7, 7, -7, 7], dtype=np.int32)
    b = np.array([3, 3, -3, -3], dtype=np.int32)
    # fmod=0: result takes the divisor's sign (Python %); fmod=1: the dividend's (C fmod).
    np.testing.assert_array_equal(run("Mod", [a, b], 13), [2, 1, -1, -2])
    np.testing.assert_array_equal(run("Mod", [a, b], 13, fmod=1), [-1, 1, -1, 1])
    np.testing.assert_array_equal(run("Mod", [a, b], 10, fmod=1), [-1, 1, -1, 1])


def test_elementwise_mod_float_needs_fmod_before_opset_28():
    a = np.array([-7.5, 7.5], np.float32)
    b = np.array([2.0, -2.0], np.float32)
    y = run("Mod", [a, b], 13, fmod=1)
    np.testing.assert_array_equal(y, np.array([math.fmod(-7.5, 2), math.fmod(7.5, -2)], np.float32))
    with pytest.raises(NodeExecutionError, match="fmod=1"):
        run("Mod", [a, b], 13)
    # Mod-28 defines fmod=0 for floats: A - floor(A / B) * B.
    y = run("Mod", [a, b], 28)
    np.testing.assert_array_equal(
        y, np.array([-7.5 - math.floor(-7.5 / 2) * 2, 7.5 - math.floor(7.5 / -2) * -2], np.float32)
    )


def test_elementwise_pow_mixed_types_keep_base_type():
    base = np.array([2, 3, 4], np.float32)
    y = run("Pow", [base, np.array([3, -1, 0], np.int64)], 15)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [8, 1 / 3, 1], rtol=1e-7)
    ib = np.array([2, 3, 2, -2], np.int32)
    y = run("Pow", [ib, np.array([0.5, 2.0, -1.0, 3.0], np.float32)], 15)
    assert y.dtype == np.int32
    # 2**0.5 = 1.414 -> 1 and 2**-1 = 0.5 -> 0 (truncation to the base's int type).
    np.testing.assert_array_equal(y, [1, 9, 0, -8])
    y = run("Pow", [ib, np.array([2, 3, 10, 3], np.int64)], 15)
    np.testing.assert_array_equal(y, np.array([4, 27, 1024, -8], np.int32))


def test_elementwise_pow_v1_legacy_broadcast():
    x = np.array([[1, 2], [3, 4]], np.float32)
    y = run("Pow", [x, np.array([2], np.float32)], 1, broadcast=1)
    np.testing.assert_array_equal(y, x * x)


# --- variadic Max / Min / Sum / Mean ---------------------------------------------


def test_elementwise_variadic_broadcast_three_inputs():
    a = np.array([[1], [5], [3]], np.float32)  # (3, 1)
    b = np.array([[4, 2, 6, 0]], np.float32)  # (1, 4)
    c = np.array(2.5, np.float32)  # ()
    np.testing.assert_array_equal(run("Max", [a, b, c], 13), np.maximum(np.maximum(a, b), c))
    np.testing.assert_array_equal(run("Min", [a, b, c], 13), np.minimum(np.minimum(a, b), c))
    np.testing.assert_array_equal(run("Sum", [a, b, c], 13), a + b + c)
    np.testing.assert_allclose(run("Mean", [a, b, c], 13), (a + b + c) / 3, rtol=1e-6)


def test_elementwise_variadic_single_input_and_integers():
    x = np.array([3, -1], np.int64)
    np.testing.assert_array_equal(run("Max", [x], 13), x)
    y = run("Min", [x, np.array([0, 0], np.int64)], 13)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [0, -1])


def test_elementwise_variadic_v6_requires_equal_shapes():
    a = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(run("Sum", [a, a], 6), a + a)
    with pytest.raises(NodeExecutionError, match="one shape"):
        run("Sum", [a, np.ones(2, np.float32)], 6)
    np.testing.assert_array_equal(run("Max", [a, 2 * a], 1, consumed_inputs=[0]), 2 * a)


def test_elementwise_mean_float16_keeps_dtype():
    a = np.array([1, 2], np.float16)
    b = np.array([2, 5], np.float16)
    y = run("Mean", [a, b], 13)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.array([1.5, 3.5], np.float16))


# --- Clip ------------------------------------------------------------------------


def test_elementwise_clip_min_greater_than_max_gives_max():
    x = np.array([-3, 0, 3, 10], np.float32)
    y = run("Clip", [x, np.array(5, np.float32), np.array(1, np.float32)], 13)
    np.testing.assert_array_equal(y, [1, 1, 1, 1])


def test_elementwise_clip_integer_and_omitted_bounds():
    x = np.array([-100, -2, 0, 7, 100], np.int32)
    lo, hi = np.array(-5, np.int32), np.array(8, np.int32)
    y = run("Clip", [x, lo, hi], 13)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [-5, -2, 0, 7, 8])
    np.testing.assert_array_equal(run("Clip", [x, None, hi], 13), [-100, -2, 0, 7, 8])
    np.testing.assert_array_equal(run("Clip", [x, lo], 13), [-5, -2, 0, 7, 100])
    np.testing.assert_array_equal(run("Clip", [x], 13), x)


def test_elementwise_clip_old_attribute_versions():
    x = np.array([-2, 0.5, 3], np.float32)
    np.testing.assert_array_equal(run("Clip", [x], 6, min=-1.0, max=1.0), [-1, 0.5, 1])
    np.testing.assert_array_equal(run("Clip", [x], 6), x)  # defaults are -/+FLT_MAX
    np.testing.assert_array_equal(run("Clip", [x], 1, max=0.0), [-2, 0, 0])
    y = run("Clip", [np.array([np.nan, 5], np.float16)], 6, max=1.0)
    assert y.dtype == np.float16 and np.isnan(y[0]) and y[1] == 1


# --- unary math ------------------------------------------------------------------


def test_elementwise_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6], np.float32)
    y = run("Round", [x], 22)
    np.testing.assert_array_equal(y, [0, 2, 2, -0.0, -2, -2, 2, 3, -3])
    assert np.signbit(y[3])


def test_elementwise_unary_keeps_float16_and_bfloat16():
    x = np.array([0.25, 4.0], np.float16)
    y = run("Sqrt", [x], 13)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.array([0.5, 2.0], np.float16))
    xb = np.array([1.0, 4.0], ml_dtypes.bfloat16)
    yb = run("Sqrt", [xb], 13)
    assert yb.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(yb.astype(np.float32), [1.0, 2.0])
    s = run("Add", [xb, xb], 14)
    assert s.dtype == ml_dtypes.bfloat16


def test_elementwise_unary_v1_consumed_inputs_and_values():
    x = np.array([-1.5, 2.0], np.float32)
    np.testing.assert_array_equal(run("Abs", [x], 1, consumed_inputs=[0]), [1.5, 2.0])
    np.testing.assert_array_equal(run("Neg", [x], 6), [1.5, -2.0])
    np.testing.assert_array_equal(run("Ceil", [x], 13), [-1.0, 2.0])
    np.testing.assert_array_equal(run("Floor", [x], 13), [-2.0, 2.0])
    np.testing.assert_array_equal(run("Reciprocal", [x], 13), np.array([1 / -1.5, 0.5], np.float32))
    i8 = np.array([-128, -3, 5], np.int8)
    np.testing.assert_array_equal(run("Abs", [i8], 13), np.array([-128, 3, 5], np.int8))
    np.testing.assert_array_equal(run("Sign", [i8], 13), [-1, -1, 1])


def test_elementwise_trig_and_erf_match_math():
    x = np.array([-0.9, -0.1, 0.0, 0.3, 0.8], np.float64)
    for name, fn in [
        ("Sin", math.sin),
        ("Cos", math.cos),
        ("Tan", math.tan),
        ("Asin", math.asin),
        ("Acos", math.acos),
        ("Atan", math.atan),
        ("Sinh", math.sinh),
        ("Cosh", math.cosh),
        ("Asinh", math.asinh),
        ("Atanh", math.atanh),
        ("Erf", math.erf),
        ("Exp", math.exp),
    ]:
        y = run(name, [x], 13 if name == "Erf" else 22)
        assert y.dtype == np.float64
        np.testing.assert_allclose(y, [fn(v) for v in x], rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(
        run("Acosh", [np.array([1.0, 2.5])], 9), [0.0, math.acosh(2.5)], rtol=1e-12
    )
    np.testing.assert_allclose(run("Log", [np.array([1.0, math.e])], 13), [0.0, 1.0])


def test_elementwise_isinf_isnan():
    x = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(run("IsInf", [x], 20), [True, True, False, False])
    np.testing.assert_array_equal(
        run("IsInf", [x], 10, detect_negative=0), [True, False, False, False]
    )
    np.testing.assert_array_equal(
        run("IsInf", [x], 10, detect_positive=0), [False, True, False, False]
    )
    np.testing.assert_array_equal(run("IsNaN", [x], 13), [False, False, True, False])


def test_elementwise_identity_passes_through():
    x = np.array([[1, 2]], np.int64)
    np.testing.assert_array_equal(run("Identity", [x], 1), x)
    assert run("Identity", [x], 21).dtype == np.int64


# --- logic / comparison / bitwise --------------------------------------------------


def test_logic_where_three_way_broadcast():
    cond = np.array([True, False]).reshape(2, 1, 1)
    x = np.array([1, 2, 3], np.int32).reshape(1, 3, 1)
    y = np.array([10, 20, 30, 40], np.int32).reshape(1, 1, 4)
    out = run("Where", [cond, x, y], 16)
    assert out.shape == (2, 3, 4) and out.dtype == np.int32
    np.testing.assert_array_equal(out[0], np.repeat(x[0], 4, axis=1))
    np.testing.assert_array_equal(out[1], np.repeat(y[0], 3, axis=0))
    s = run(
        "Where",
        [
            np.array([True, False]),
            np.array(["a", "b"], dtype=object),
            np.array(["c", "d"], dtype=object),
        ],
        9,
    )
    assert list(s) == ["a", "d"]


def test_logic_bitshift_unsigned_left_right():
    x = np.array([16, 4, 1, 200], np.uint8)
    s = np.array([1, 2, 3, 1], np.uint8)
    np.testing.assert_array_equal(
        run("BitShift", [x, s], 11, direction="LEFT"), np.array([32, 16, 8, 144], np.uint8)
    )  # 400 mod 256
    np.testing.assert_array_equal(
        run("BitShift", [x, s], 11, direction="RIGHT"), np.array([8, 1, 0, 100], np.uint8)
    )
    big = np.array([2**63], np.uint64)
    np.testing.assert_array_equal(
        run("BitShift", [big, np.array([63], np.uint64)], 11, direction="RIGHT"), [1]
    )


def test_logic_bitshift_signed_opset28_edge_cases():
    x = np.array([-16, -5, 5, 3, 64], np.int8)
    s = np.array([2, 9, 9, -1, 1], np.int8)
    # Arithmetic right shift; a count >= 8 or < 0 leaves only the sign extension.
    np.testing.assert_array_equal(
        run("BitShift", [x, s], 28, direction="RIGHT"), [-4, -1, 0, 0, 32]
    )
    # Left shifts drop bits past the sign bit: 64 << 1 = -128 in int8.
    np.testing.assert_array_equal(
        run("BitShift", [x, s], 28, direction="LEFT"), [-64, 0, 0, 0, -128]
    )


def test_logic_bitwise_ops():
    a = np.array([0b1100, 0b1010], np.uint8)
    b = np.array([0b1010, 0b0110], np.uint8)
    np.testing.assert_array_equal(run("BitwiseAnd", [a, b], 18), [0b1000, 0b0010])
    np.testing.assert_array_equal(run("BitwiseOr", [a, b], 18), [0b1110, 0b1110])
    np.testing.assert_array_equal(run("BitwiseXor", [a, b], 18), [0b0110, 0b1100])
    np.testing.assert_array_equal(run("BitwiseNot", [a], 18), [0b11110011, 0b11110101])
    np.testing.assert_array_equal(run("BitwiseNot", [np.array([0, -1], np.int32)], 18), [-1, 0])


def test_logic_boolean_and_comparisons():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    np.testing.assert_array_equal(run("And", [a, b], 7), [True, False, False, False])
    np.testing.assert_array_equal(run("Or", [a, b], 7), [True, True, True, False])
    np.testing.assert_array_equal(run("Xor", [a, b], 7), [False, True, True, False])
    np.testing.assert_array_equal(run("Not", [a], 1), [False, False, True, True])
    x = np.array([1, 2, 3], np.int64)
    y = np.array([2, 2, 2], np.int64)
    np.testing.assert_array_equal(run("Greater", [x, y], 13), [False, False, True])
    np.testing.assert_array_equal(run("Less", [x, y], 13), [True, False, False])
    np.testing.assert_array_equal(run("GreaterOrEqual", [x, y], 16), [False, True, True])
    np.testing.assert_array_equal(run("LessOrEqual", [x, y], 16), [True, True, False])
    np.testing.assert_array_equal(run("Equal", [x, y], 13), [False, True, False])


def test_logic_v1_legacy_broadcast_and_strings():
    a = np.array([[True, False], [False, True]])
    y = run("And", [a, np.array([True, False])], 1, broadcast=1)
    np.testing.assert_array_equal(y, [[True, False], [False, False]])
    y = run(
        "Equal",
        [np.array([[1, 2], [3, 4]], np.int32), np.array([1, 3], np.int32)],
        1,
        broadcast=1,
        axis=0,
    )
    np.testing.assert_array_equal(y, [[True, False], [True, False]])
    s = run("Equal", [np.array(["a", "bb"], dtype=object), np.array(["a"], dtype=object)], 19)
    np.testing.assert_array_equal(s, [True, False])
