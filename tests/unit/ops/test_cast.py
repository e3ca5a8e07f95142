"""Cast, CastLike and BitCast (ops/cast.py, ops/cast_float8.py).

float8 expectations come from an independent brute-force reference: decode all 256
codes, take the nearest finite value (ties to the even code), then apply the
overflow tables of Operators.md Cast.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.runtime.session import InferenceSession

F8 = {
    TensorProto.FLOAT8E4M3FN: (ml_dtypes.float8_e4m3fn, 448.0),
    TensorProto.FLOAT8E4M3FNUZ: (ml_dtypes.float8_e4m3fnuz, 240.0),
    TensorProto.FLOAT8E5M2: (ml_dtypes.float8_e5m2, 57344.0),
    TensorProto.FLOAT8E5M2FNUZ: (ml_dtypes.float8_e5m2fnuz, 57344.0),
}


def run(op_type: str, inputs: list, opset: int, **attrs) -> np.ndarray:
    names = [f"x{i}" for i in range(len(inputs))]
    infos = [
        helper.make_tensor_value_info(n, onnx_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs, strict=True)
    ]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph([node], "t", infos, [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return InferenceSession(model).run(None, dict(zip(names, inputs, strict=True)))[0]


def f8_reference(x: float, dtype: type) -> np.uint8:
    """Code of the nearest finite float8 value to x (in range), ties to the even code."""
    codes = np.arange(256, dtype=np.uint8)
    vals = codes.view(dtype).astype(np.float64)
    ok = np.isfinite(vals)
    dist = np.abs(vals[ok] - x)
    cands = codes[ok][dist == dist.min()]
    if len(cands) > 1:  # +0/-0: keep x's sign where the type has -0
        same_sign = [c for c in cands if (c >= 0x80) == (np.signbit(x))]
        cands = np.array(same_sign or list(cands), np.uint8)
        cands = [c for c in cands if c % 2 == 0] or list(cands)
    return np.uint8(cands[0])


# --- numeric rules -----------------------------------------------------------------


def test_cast_float_to_int_truncates_toward_zero():
    x = np.array([2.7, -2.7, 0.5, -0.5, 1e9], np.float32)
    np.testing.assert_array_equal(
        run("Cast", [x], 21, to=TensorProto.INT32), [2, -2, 0, 0, 1000000000]
    )
    np.testing.assert_array_equal(run("Cast", [x[:4]], 13, to=TensorProto.INT8), [2, -2, 0, 0])


def test_cast_v1_takes_type_name_string():
    x = np.array([1.9, -1.9], np.float64)
    y = run("Cast", [x], 1, to="INT64")
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [1, -1])
    assert run("Cast", [x], 1, to="float").dtype == np.float32


def test_cast_int_to_int_wraps_twos_complement():
    # Operators.md Cast: "200 (int16) -> -56 (int8)".
    np.testing.assert_array_equal(
        run("Cast", [np.array([200, -129, 127], np.int16)], 13, to=TensorProto.INT8),
        [-56, 127, 127],
    )
    np.testing.assert_array_equal(
        run("Cast", [np.array([2**40 + 3, -1], np.int64)], 13, to=TensorProto.INT32), [3, -1]
    )
    np.testing.assert_array_equal(
        run("Cast", [np.array([-1, 256], np.int32)], 13, to=TensorProto.UINT8), [255, 0]
    )


def test_cast_to_bool_and_back():
    x = np.array([0.0, -0.0, np.nan, 0.1, -3.0], np.float32)
    np.testing.assert_array_equal(
        run("Cast", [x], 13, to=TensorProto.BOOL), [False, False, True, True, True]
    )
    b = np.array([True, False])
    np.testing.assert_array_equal(run("Cast", [b], 13, to=TensorProto.FLOAT), [1.0, 0.0])
    np.testing.assert_array_equal(run("Cast", [b], 13, to=TensorProto.INT64), [1, 0])


def test_cast_bfloat16_round_to_nearest_even():
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 3.0e38], np.float32)
    y = run("Cast", [x], 13, to=TensorProto.BFLOAT16)
    assert y.dtype == ml_dtypes.bfloat16
    # ulp(1) = 2**-7: exact ties go to the even mantissa, anything above a tie goes up.
    # 3.0e38 = 1.7632 * 2**127 -> mantissa 225.69 / 128 rounds to 226 / 128 (finite).
    np.testing.assert_array_equal(
        y.astype(np.float64), [1.0, 1 + 2**-6, 1 + 2**-7, 2**127 * 226 / 128]
    )


def test_cast_double_rounds_once():
    # Rounding double -> float32 -> bfloat16 would see an exact tie and go to 1.0.
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-4 + 2**-30], np.float64)
    np.testing.assert_array_equal(
        run("Cast", [x[:1]], 13, to=TensorProto.BFLOAT16).astype(np.float64), [1 + 2**-7]
    )
    np.testing.assert_array_equal(
        run("Cast", [x[1:]], 19, to=TensorProto.FLOAT8E4M3FN).astype(np.float64), [1.125]
    )


# --- float8 -----------------------------------------------------------------------


@pytest.mark.parametrize("to", list(F8), ids=[TensorProto.DataType.Name(t) for t in F8])
def test_cast_float8_in_range_matches_rne_reference(to):
    dtype, fmax = F8[to]
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-fmax, fmax, 300),
            rng.normal(0, 1, 300),
            rng.normal(0, 1e-3, 100),
            [1.0625, 1.1875, -1.0625, 0.3, 1e-9, -1e-9],
        ]
    ).astype(np.float32)
    y = run("Cast", [x], 19, to=to).view(np.uint8)
    ref = np.array([f8_reference(float(v), dtype) for v in x], np.uint8)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("to", list(F8), ids=[TensorProto.DataType.Name(t) for t in F8])
def test_cast_float8_saturate_clamps_to_max_finite(to):
    fmax = F8[to][1]
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan], np.float32)
    for opset in (19, 25):
        y = run("Cast", [x], opset, to=to).astype(np.float64)
        np.testing.assert_array_equal(y[:4], [fmax, -fmax, fmax, -fmax])
        assert np.isnan(y[4])
    x16 = np.array([np.inf, -np.inf, 65504, -65504], np.float16)
    y16 = run("Cast", [x16], 19, to=to, saturate=1).astype(np.float64)
    np.testing.assert_array_equal(y16[:4], [fmax, -fmax, fmax, -fmax])


@pytest.mark.parametrize("to", list(F8), ids=[TensorProto.DataType.Name(t) for t in F8])
def test_cast_float8_no_saturate_overflow(to):
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan], np.float32)
    y = run("Cast", [x], 19, to=to, saturate=0).astype(np.float64)
    if to == TensorProto.FLOAT8E5M2:  # the only float8 with infinities
        np.testing.assert_array_equal(y[:4], [np.inf, -np.inf, np.inf, -np.inf])
        assert np.isnan(y[4])
    else:
        assert np.isnan(y).all()


def test_cast_float8_rounding_at_the_top_and_negative_zero():
    # 464 is the exact midpoint of 448 (mantissa 110) and 480 (111, the NaN code in
    # E4M3FN): RNE gives 448, so even saturate=0 does not overflow; 465 does.
    y = run(
        "Cast",
        [np.array([464, 465, -464], np.float32)],
        19,
        to=TensorProto.FLOAT8E4M3FN,
        saturate=0,
    ).astype(np.float64)
    assert y[0] == 448 and np.isnan(y[1]) and y[2] == -448
    neg0 = np.array([-0.0], np.float32)
    assert run("Cast", [neg0], 19, to=TensorProto.FLOAT8E4M3FN).view(np.uint8)[0] == 0x80
    assert run("Cast", [neg0], 19, to=TensorProto.FLOAT8E5M2).view(np.uint8)[0] == 0x80
    assert run("Cast", [neg0], 19, to=TensorProto.FLOAT8E4M3FNUZ).view(np.uint8)[0] == 0
    assert run("Cast", [neg0], 19, to=TensorProto.FLOAT8E5M2FNUZ).view(np.uint8)[0] == 0


def test_cast_float8_to_float_is_exact():
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    y = run("Cast", [codes], 19, to=TensorProto.FLOAT)
    finite = ~np.isnan(y)
    assert finite.sum() == 254  # 0x7F and 0xFF are NaN
    np.testing.assert_array_equal(
        run("Cast", [y[finite]], 19, to=TensorProto.FLOAT8E4M3FN).view(np.uint8),
        np.arange(256)[finite],
    )


def test_cast_float8e8m0_round_modes():
    x = np.array([0.124, 1.1, 1.5, 3.0, 2.0, 0.0, 2.0**130, np.inf, np.nan], np.float64)
    t = TensorProto.FLOAT8E8M0

    def as_f64(y):
        assert y.dtype == ml_dtypes.float8_e8m0fnu
        return y.astype(np.float64)

    up = as_f64(run("Cast", [x], 24, to=t))  # defaults: saturate=1, round_mode="up"
    np.testing.assert_array_equal(up[:8], [0.125, 2, 2, 4, 2, 2.0**-127, 2.0**127, 2.0**127])
    assert np.isnan(up[8])
    down = as_f64(run("Cast", [x[:5]], 24, to=t, round_mode="down"))
    np.testing.assert_array_equal(down, [0.0625, 1, 1, 2, 2])
    # nearest is linear with ties up: 1.5 is halfway between 1 and 2, 3 between 2 and 4.
    near = as_f64(run("Cast", [x], 25, to=t, round_mode="nearest", saturate=0))
    np.testing.assert_array_equal(near[:5], [0.125, 1, 2, 4, 2])
    assert np.isnan(near[5:]).all()  # 0, overflow, inf and NaN are NaN without saturation


# --- sub-byte types -----------------------------------------------------------------


def test_cast_int4_uint4_int2_wrap():
    x = np.array([-9, -8, 7, 8, 15, 2.7, -2.7], np.float32)
    np.testing.assert_array_equal(
        run("Cast", [x], 21, to=TensorProto.INT4).astype(np.int32), [7, -8, 7, -8, -1, 2, -2]
    )
    np.testing.assert_array_equal(
        run("Cast", [x[:5]], 21, to=TensorProto.UINT4).astype(np.int32), [7, 8, 7, 8, 15]
    )
    x2 = np.arange(-3, 4, dtype=np.float32)
    np.testing.assert_array_equal(
        run("Cast", [x2], 25, to=TensorProto.INT2).astype(np.int32), [1, -2, -1, 0, 1, -2, -1]
    )
    np.testing.assert_array_equal(
        run("Cast", [x2], 25, to=TensorProto.UINT2).astype(np.int32), [1, 2, 3, 0, 1, 2, 3]
    )
    i4 = np.array([-8, -1, 7], ml_dtypes.int4)
    np.testing.assert_array_equal(run("Cast", [i4], 21, to=TensorProto.INT8), [-8, -1, 7])
    np.testing.assert_array_equal(run("Cast", [i4], 21, to=TensorProto.FLOAT), [-8, -1, 7])


def test_cast_float4e2m1_rne_and_saturation():
    # Representable: 0, 0.5, 1, 1.5, 2, 3, 4, 6. Ties go to the even mantissa.
    x = np.array([0.25, 0.75, 2.5, 5.0, 7.0, 1e6, -np.inf, -1.2], np.float32)
    y = run("Cast", [x], 23, to=TensorProto.FLOAT4E2M1)
    np.testing.assert_array_equal(y.astype(np.float32), [0, 1, 2, 4, 6, 6, -6, -1])


# --- strings ------------------------------------------------------------------------


def test_cast_numbers_to_string():
    x = np.array([0.47892547, 100.0, 1e20, np.nan, np.inf, -np.inf, -0.0, 1.5e-7], np.float32)
    y = run("Cast", [x], 21, to=TensorProto.STRING)
    assert y.dtype == object
    assert list(y) == ["0.47892547", "100", "1e+20", "NaN", "INF", "-INF", "-0", "1.5e-07"]
    assert np.float32(y[0]) == x[0]  # shortest text that reads back exactly
    ints = run("Cast", [np.array([-5, 2**40], np.int64)], 21, to=TensorProto.STRING)
    assert list(ints) == ["-5", "1099511627776"]
    bools = run("Cast", [np.array([True, False])], 21, to=TensorProto.STRING)
    assert list(bools) == ["1", "0"]


def test_cast_string_to_numbers():
    s = np.array(["+INF", "inf", "-INF", "NaN", "nan", "1e-5", "1E8", "3.14"], dtype=object)
    y = run("Cast", [s], 9, to=TensorProto.FLOAT)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(
        y[[0, 1, 2, 5, 6, 7]], np.array([np.inf, np.inf, -np.inf, 1e-5, 1e8, 3.14], np.float32)
    )
    assert np.isnan(y[3]) and np.isnan(y[4])
    ints = run(
        "Cast",
        [np.array(["100", "-7", "100.5", "9223372036854775807"], dtype=object)],
        13,
        to=TensorProto.INT64,
    )
    np.testing.assert_array_equal(ints, [100, -7, 100, 2**63 - 1])
    f8 = run("Cast", [np.array(["1000000", "-INF"], dtype=object)], 19, to=TensorProto.FLOAT8E4M3FN)
    np.testing.assert_array_equal(f8.astype(np.float32), [448, -448])  # saturates too
    b = run(
        "Cast",
        [np.array(["0", "1", "2.5", "true", "False"], dtype=object)],
        13,
        to=TensorProto.BOOL,
    )
    np.testing.assert_array_equal(b, [False, True, True, True, False])


# --- CastLike / BitCast -----------------------------------------------------------------


def test_castlike_versions():
    x = np.array([1.5, 1e6, -2.5], np.float32)
    y = run("CastLike", [x, np.zeros(1, np.float16)], 15)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.array([1.5, np.inf, -2.5], np.float16))
    like = np.zeros(1, ml_dtypes.float8_e4m3fn)
    sat = run("CastLike", [x, like], 19).astype(np.float32)
    np.testing.assert_array_equal(sat, [1.5, 448, -2.5])
    assert np.isnan(run("CastLike", [x, like], 19, saturate=0).astype(np.float32)[1])
    s = run("CastLike", [np.array([3, -1], np.int32), np.array(["a"], dtype=object)], 24)
    assert list(s) == ["3", "-1"]


def test_bitcast_reinterprets_bits():
    y = run("BitCast", [np.array([1.0, -2.0], np.float32)], 26, to=TensorProto.INT32)
    np.testing.assert_array_equal(y, [0x3F800000, np.int32(np.uint32(0xC0000000).view(np.int32))])
    s = run("BitCast", [np.array(1.0, np.float32)], 26, to=TensorProto.UINT32)
    assert s.shape == () and s == 0x3F800000
    u = run("BitCast", [np.array([-1, -8, 7], ml_dtypes.int4)], 26, to=TensorProto.UINT4)
    np.testing.assert_array_equal(u.astype(np.int32), [15, 8, 7])
    with pytest.raises(Exception, match="bits"):
        run("BitCast", [np.array([1], np.int16)], 26, to=TensorProto.INT32)
