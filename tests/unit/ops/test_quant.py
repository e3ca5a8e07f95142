"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (ops/quant.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from tests.unit.ops._node import run_node

X = np.array([0.0, 1.0, 2.5, 3.5, -2.5, 1000.0, -1000.0], np.float32)


def test_quantize_uint8_rounds_half_to_even_and_saturates():
    (y,) = run_node(
        "QuantizeLinear", [X, np.array(1.0, np.float32), np.array(10, np.uint8)], opset=21
    )
    # 2.5 -> 2, 3.5 -> 4, -2.5 -> -2 (ties to even), then + 10, clamp to [0, 255].
    assert y.dtype == np.uint8 and y.tolist() == [10, 11, 12, 14, 8, 255, 0]


def test_quantize_default_output_is_uint8_and_output_dtype():
    (y,) = run_node("QuantizeLinear", [X, np.array(2.0, np.float32)], opset=10)
    assert y.dtype == np.uint8 and y.tolist() == [0, 0, 1, 2, 0, 255, 0]
    (y,) = run_node(
        "QuantizeLinear", [X, np.array(2.0, np.float32)], opset=21, output_dtype=TensorProto.INT16
    )
    assert y.dtype == np.int16 and y.tolist() == [0, 0, 1, 2, -1, 500, -500]


def test_quantize_per_axis_v13():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    scale = np.array([1.0, 0.5], np.float32)
    zp = np.array([0, 100], np.int8)
    (y,) = run_node("QuantizeLinear", [x, scale, zp], opset=13, axis=0)
    assert y.dtype == np.int8 and y.tolist() == [[1, 2], [106, 108]]
    (y,) = run_node("QuantizeLinear", [x, scale, zp], opset=13, axis=-1)
    assert y.tolist() == [[1, 104], [3, 108]]


def test_quantize_blocked_v21():
    x = np.arange(6, dtype=np.float32).reshape(1, 6) * 2  # [0, 2, 4, 6, 8, 10]
    scale = np.array([[1.0, 2.0]], np.float32)  # block_size 4: [1,1,1,1,2,2] (last block short)
    (y,) = run_node("QuantizeLinear", [x, scale], opset=21, axis=1, block_size=4)
    assert y.tolist() == [[0, 2, 4, 6, 4, 5]]


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (ml_dtypes.int4, [0, 1, 2, 4, -2, 7, -8]),
        (ml_dtypes.uint4, [0, 1, 2, 4, 0, 15, 0]),
        (ml_dtypes.int2, [0, 1, 1, 1, -2, 1, -2]),
    ],
)
def test_quantize_small_integer_types(dtype, values):
    # int2 zero points exist from QuantizeLinear-25 (at 21 onnxruntime refuses the model)
    opset = 25 if dtype == ml_dtypes.int2 else 21
    zp = np.array(0, dtype)
    (y,) = run_node("QuantizeLinear", [X, np.array(1.0, np.float32), zp], opset=opset)
    assert y.dtype == dtype
    assert y.astype(np.int32).tolist() == values


def test_quantize_float8_saturate():
    x = np.array([1.0, 1000.0, -np.inf, np.nan], np.float32)
    zp = np.array(0, ml_dtypes.float8_e4m3fn)
    (y,) = run_node("QuantizeLinear", [x, np.array(1.0, np.float32), zp], opset=19)
    # E4M3FN saturates to +-448; NaN stays NaN.
    np.testing.assert_array_equal(y.astype(np.float32), [1.0, 448.0, -448.0, np.nan])
    (y,) = run_node("QuantizeLinear", [x, np.array(1.0, np.float32), zp], opset=19, saturate=0)
    # Without saturation 1000 and -inf overflow to NaN (E4M3FN has no infinity).
    assert np.isnan(y.astype(np.float32)[1:]).all()


def test_dequantize_per_tensor_axis_and_blocked():
    x = np.array([[0, 10], [20, 255]], np.uint8)
    (y,) = run_node(
        "DequantizeLinear", [x, np.array(0.5, np.float32), np.array(10, np.uint8)], opset=10
    )
    assert y.dtype == np.float32 and y.tolist() == [[-5, 0], [5, 122.5]]
    scale = np.array([1.0, 2.0], np.float32)
    (y,) = run_node("DequantizeLinear", [x, scale], opset=13, axis=1)
    assert y.tolist() == [[0, 20], [20, 510]]
    (y,) = run_node("DequantizeLinear", [x, scale.reshape(2, 1)], opset=21, axis=1, block_size=2)
    assert y.tolist() == [[0, 10], [40, 510]]


def test_dequantize_output_dtype_and_scale_dtype():
    x = np.array([1, -2], np.int8)
    (y,) = run_node("DequantizeLinear", [x, np.array(0.5, np.float16)], opset=19)
    assert y.dtype == np.float16 and y.tolist() == [0.5, -1.0]
    (y,) = run_node(
        "DequantizeLinear",
        [x, np.array(0.5, np.float32)],
        opset=23,
        output_dtype=TensorProto.BFLOAT16,
    )
    assert y.dtype == ml_dtypes.bfloat16 and y.astype(np.float32).tolist() == [0.5, -1.0]


def test_dequantize_int4_and_float8():
    x = np.array([-8, 7, 1], ml_dtypes.int4)
    (y,) = run_node(
        "DequantizeLinear", [x, np.array(2.0, np.float32), np.array(1, ml_dtypes.int4)], opset=21
    )
    assert y.tolist() == [-18.0, 12.0, 0.0]
    x8 = np.array([0.5, -3.0], ml_dtypes.float8_e5m2)
    (y,) = run_node("DequantizeLinear", [x8, np.array(4.0, np.float32)], opset=19)
    assert y.tolist() == [2.0, -12.0]


def test_dequantize_zero_point_type_mismatch_raises():
    # refused at session creation (type parameter T bound twice), as onnxruntime does
    with pytest.raises(Exception, match=r"zero point type|type parameter T is bound"):
        run_node(
            "DequantizeLinear",
            [np.array([1], np.uint8), np.array(1.0, np.float32), np.array(0, np.int8)],
            opset=13,
        )


def test_dynamic_quantize_linear_spec_formula():
    x = np.array([0.0, 2.0, -3.0, -2.5, 1.34, 0.5], np.float32)
    y, scale, zp = run_node("DynamicQuantizeLinear", [x], 3, opset=11)
    # Operators.md DynamicQuantizeLinear: range [min(x,0), max(x,0)] = [-3, 2] over 255 steps.
    exp_scale = np.float32(5.0) / np.float32(255)
    exp_zp = np.rint(np.clip(0 - np.float32(-3.0) / exp_scale, 0, 255))
    exp_y = np.clip(np.rint(x / exp_scale) + exp_zp, 0, 255)
    assert scale.dtype == np.float32 and zp.dtype == np.uint8 and y.dtype == np.uint8
    assert float(scale) == pytest.approx(float(exp_scale))
    assert int(zp) == int(exp_zp) == 153
    np.testing.assert_array_equal(y, exp_y.astype(np.uint8))


def test_dynamic_quantize_linear_all_zero():
    y, scale, zp = run_node("DynamicQuantizeLinear", [np.zeros(3, np.float32)], 3, opset=11)
    assert y.tolist() == [0, 0, 0] and int(zp) == 0 and np.isfinite(scale)
