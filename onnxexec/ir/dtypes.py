"""ONNX element types <-> numpy dtypes and onnxruntime-style type strings.

Exotic ONNX types (bfloat16, float8, int4, float4...) map to ml_dtypes' numpy
dtypes, the same ones onnx's own numpy_helper produces, so values compare with
the backend test expectations without conversion. ml_dtypes is imported only when one
of those types is asked for: its import registers ~20 dtypes' ufunc loops with numpy
and takes ~0.5 s and 8 MB (measured with numpy 2.4), which a GGUF or float32 model
never needs.
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import Final

import numpy as np


class TensorProto(IntEnum):
    """onnx.TensorProto.DataType's values (onnx.proto), spelled as onnx spells them.

    Our own copy so that the IR, the ops and the GGUF path never import onnx (about
    0.3-0.7 s); tests/unit/runtime/test_import_weight.py checks it against onnx's enum
    value by value.
    """

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28


_NP: dict[int, np.dtype] = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.STRING: np.dtype(object),
    TensorProto.BOOL: np.dtype(np.bool_),
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.UINT32: np.dtype(np.uint32),
    TensorProto.UINT64: np.dtype(np.uint64),
    TensorProto.COMPLEX64: np.dtype(np.complex64),
    TensorProto.COMPLEX128: np.dtype(np.complex128),
}
_ONNX: dict[np.dtype, int] = {v: k for k, v in _NP.items()}
# ml_dtypes' attribute for each exotic element type (added to _NP/_ONNX on first use)
_ML_DTYPES: Final[dict[int, str]] = {
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    TensorProto.FLOAT8E5M2: "float8_e5m2",
    TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    TensorProto.UINT4: "uint4",
    TensorProto.INT4: "int4",
    TensorProto.FLOAT4E2M1: "float4_e2m1fn",
    TensorProto.FLOAT8E8M0: "float8_e8m0fnu",
    TensorProto.UINT2: "uint2",
    TensorProto.INT2: "int2",
    TensorProto.FLOAT6E2M3: "float6_e2m3fn",
    TensorProto.FLOAT6E3M2: "float6_e3m2fn",
}


def _add_ml_dtypes() -> None:
    """Import ml_dtypes and add its dtypes to both tables (once)."""
    import ml_dtypes

    for t, name in _ML_DTYPES.items():
        dt = np.dtype(getattr(ml_dtypes, name))
        _NP[t] = dt
        _ONNX[dt] = t


# onnxruntime's spelling of element types in NodeArg.type ("tensor(float)").
_NAMES: Final[dict[int, str]] = {
    TensorProto.FLOAT: "float",
    TensorProto.DOUBLE: "double",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.BOOL: "bool",
    TensorProto.STRING: "string",
    TensorProto.COMPLEX64: "complex64",
    TensorProto.COMPLEX128: "complex128",
}


def np_dtype(elem_type: int) -> np.dtype:
    """numpy dtype of an ONNX TensorProto.DataType value."""
    dt = _NP.get(elem_type)
    if dt is None and elem_type in _ML_DTYPES:
        _add_ml_dtypes()
        dt = _NP[elem_type]
    if dt is None:
        raise ValueError(f"unknown ONNX element type {elem_type}")
    return dt


def onnx_dtype(dtype: np.dtype | type) -> int:
    """ONNX TensorProto.DataType value of a numpy dtype."""
    dt = np.dtype(dtype)
    if dt.kind in "US":
        return int(TensorProto.STRING)
    t = _ONNX.get(dt)
    # A dtype that is not numpy's own can only be one of ml_dtypes' once it is imported.
    if t is None and TensorProto.BFLOAT16 not in _NP and "ml_dtypes" in sys.modules:
        _add_ml_dtypes()
        t = _ONNX.get(dt)
    if t is None:
        raise ValueError(f"numpy dtype {dt} has no ONNX element type")
    return int(t)  # a plain int, as onnx's own enum values are


def type_name(elem_type: int) -> str:
    """Element type as onnxruntime prints it: 'float', 'int64', 'float8e4m3fn'."""
    if elem_type in _NAMES:
        return _NAMES[elem_type]
    try:
        return TensorProto(elem_type).name.lower()
    except ValueError:
        raise ValueError(f"unknown ONNX element type {elem_type}") from None
