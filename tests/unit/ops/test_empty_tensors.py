"""Empty tensors (a 0-sized dim) through every ai.onnx op that allows them.

One node per case at the op's newest opset, run by onnxexec and by onnxruntime
(the oracle): output shapes, dtypes and values must agree. Inputs are hand-picked per
op; where onnxruntime itself fails or is wrong on the empty case, the case carries the
spec's expected outputs instead and a comment saying why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx.defs
import pytest

from onnxexec.ops.registry import all_handlers
from tests.unit.ops._node import run_node, run_ort

# Statistics over an empty batch (MeanVarianceNormalization) are NaN = 0/0 by design.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return (RNG.random(shape) + 0.5).astype(np.float32)


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def i32z(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.int32)


def s(v: float, dtype: type = np.float32) -> np.ndarray:
    return np.array(v, dtype)


@dataclass
class Case:
    op: str
    inputs: list[np.ndarray | None]
    attrs: dict[str, Any] = field(default_factory=dict)
    n_outputs: int = 1
    # Opset for onnxruntime when it has no kernel for the op's newest version; the
    # semantics on these inputs are the same in both versions.
    ort_opset: int | None = None
    # Opset for both runtimes instead of the op's newest (deprecated ops).
    opset: int | None = None
    # Spec outputs, used instead of onnxruntime where it fails on the empty case.
    expected: list[np.ndarray] | None = None
    # False where the spec leaves the values undefined: compare shapes and dtypes only.
    values: bool = True
    id: str = ""


E = f32(0, 3)  # the workhorse: 0 rows of 3
E4 = f32(0, 3, 4, 4)  # empty batch, NCHW
PAST_CONV = f32(2, 4, 2)  # (N, C, k - 1)
PAST_STATE = f32(1, 2, 4, 4)  # (B, Hkv, Dk, Dv)

UNARY_FLOAT = [
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Erf",
    "Exp", "Floor", "Log", "Neg", "Reciprocal", "Relu", "Round", "Sigmoid", "Sign", "Sin",
    "Sinh", "Sqrt", "Tan", "Tanh", "Softplus", "Softsign", "Elu", "Celu", "Selu",
    "LeakyRelu", "HardSigmoid", "HardSwish", "ThresholdedRelu", "Shrink", "Mish", "Gelu",
    "IsNaN", "IsInf", "Identity", "Swish",
]  # fmt: skip
BINARY_FLOAT = ["Add", "Sub", "Mul", "Div", "Pow", "Equal", "Greater", "GreaterOrEqual", "Less",
                "LessOrEqual", "PRelu"]  # fmt: skip
BOOL_OPS = ["And", "Or", "Xor"]
BITWISE = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]  # fmt: skip

CASES: list[Case] = [
    *[Case(op, [E]) for op in UNARY_FLOAT],
    Case("Not", [np.zeros((2, 0), bool)]),
    Case("BitwiseNot", [i32z(0, 2)]),
    *[Case(op, [E, f32(1, 3)]) for op in BINARY_FLOAT],
    Case("Mod", [i32z(0, 3), np.ones((1, 3), np.int32)], ort_opset=13),
    Case(
        "BitShift", [np.zeros((0, 2), np.uint8), np.ones(2, np.uint8)], attrs={"direction": "LEFT"}
    ),
    *[Case(op, [np.zeros((0, 2), bool), np.ones(2, bool)]) for op in BOOL_OPS],
    *[Case(op, [i32z(0, 2), np.ones(2, np.int32)]) for op in BITWISE],
    *[Case(op, [E, f32(1, 3), f32(3)], id=f"{op}-3") for op in ("Max", "Min", "Mean", "Sum")],
    Case("Where", [np.ones((1, 3), bool), E, f32(2, 1, 1)]),  # -> (2, 0, 3)
    Case("Clip", [E, s(-0.5), s(0.5)]),
    Case("Cast", [E], {"to": onnx.TensorProto.INT32}),
    Case("CastLike", [E, np.zeros(1, np.float16)]),
    Case("Dropout", [E], n_outputs=2),
    # softmax family: empty batch, and an empty softmax axis
    *[Case(op, [E]) for op in ("Softmax", "LogSoftmax", "Hardmax")],
    *[Case(op, [f32(2, 0)], id=f"{op}-axis") for op in ("Softmax", "LogSoftmax", "Hardmax")],
    # reductions: empty kept axis, and an empty reduced axis (identity element)
    *[Case(op, [pos(0, 3), i64(1)]) for op in REDUCE],
    # ReduceMean: "Reduction over an empty set of values yields undefined" (we give
    # NaN = 0/0 like numpy, onnxruntime gives 0).
    *[
        Case(op, [pos(2, 0), i64(1)], id=f"{op}-reduced", values=op != "ReduceMean")
        for op in REDUCE
    ],
    Case("ArgMax", [f32(0, 3)], {"axis": 1}),
    Case("ArgMin", [f32(3, 0)], {"axis": 0}),
    Case("CumSum", [E, s(1, np.int64)]),
    Case("CumProd", [E, s(0, np.int64)], expected=[E]),  # not in onnxruntime 1.32
    # shape manipulation
    Case("Reshape", [E, i64(3, 0)], {"allowzero": 1}),
    Case("Reshape", [E, i64(-1, 0)], id="Reshape-copy0"),  # 0 copies dim 1 (3) -> (0, 3)
    Case("Flatten", [f32(2, 0, 3)], {"axis": 2}),
    Case("Transpose", [f32(2, 0, 3)], {"perm": [2, 0, 1]}),
    Case("Squeeze", [f32(0, 1, 3), i64(1)]),
    Case("Unsqueeze", [E, i64(0, -1)]),
    Case("Concat", [E, f32(2, 3)], {"axis": 0}),
    Case("Concat", [f32(2, 0), f32(2, 0)], {"axis": 1}, id="Concat-all-empty"),
    Case("Split", [f32(0, 4)], {"axis": 1, "num_outputs": 2}, n_outputs=2),
    Case("Split", [f32(2, 3), i64(0, 3)], {"axis": 1}, n_outputs=2, id="Split-zero-part"),
    Case("Split", [f32(0, 4)], {"axis": 0, "num_outputs": 2}, n_outputs=2, id="Split-empty-axis"),
    Case("SplitToSequence", [f32(2, 0)], {"axis": 1}),  # no length-1 pieces: empty sequence
    Case("SplitToSequence", [f32(0, 4), i64(1, 3)], {"axis": 1}, id="SplitToSequence-sizes"),
    Case("Slice", [E, i64(0), i64(2), i64(1)]),
    Case("Slice", [f32(2, 3), i64(2), i64(1), i64(1)], id="Slice-to-empty"),
    Case("Expand", [f32(1, 3), i64(0, 1)]),
    Case("Tile", [E, i64(5, 2)]),
    Case("Tile", [f32(2, 3), i64(0, 1)], id="Tile-zero-repeat"),
    Case("Pad", [E, i64(1, 0, 1, 0)]),  # constant pad of an empty dim gives real rows
    Case("Shape", [f32(2, 0, 3)]),
    Case("Size", [f32(2, 0, 3)]),
    Case("Identity", [np.zeros(0, np.int64)], id="Identity-int"),
    Case("DepthToSpace", [f32(0, 4, 2, 2)], {"blocksize": 2}),
    Case("SpaceToDepth", [f32(0, 1, 4, 4)], {"blocksize": 2}, ort_opset=13),
    Case("Trilu", [f32(2, 0, 3)]),
    Case("EyeLike", [f32(0, 3)]),
    Case("CenterCropPad", [f32(0, 4), i64(2)], {"axes": [1]}),
    Case("ReverseSequence", [f32(2, 0, 3), i64()], {"batch_axis": 1, "time_axis": 0}),
    # indexing
    Case("Gather", [f32(3, 4), np.zeros((0, 2), np.int64)], {"axis": 1}),
    Case("Gather", [E, i64(1)], {"axis": 1}, id="Gather-empty-data"),
    Case("GatherElements", [f32(3, 4), np.zeros((3, 0), np.int64)], {"axis": 1}),
    Case("GatherND", [f32(3, 4), np.zeros((0, 1), np.int64)]),
    Case("ScatterElements", [f32(3, 4), np.zeros((3, 0), np.int64), f32(3, 0)], {"axis": 1}),
    Case("ScatterND", [f32(3, 4), np.zeros((0, 1), np.int64), f32(0, 4)]),
    Case("Compress", [E, np.zeros(0, bool)], {"axis": 0}),
    Case("Compress", [f32(2, 3), np.zeros(3, bool)], {"axis": 1}, id="Compress-none-kept"),
    Case("OneHot", [np.zeros((0, 2), np.int64), s(3, np.int64), np.array([0, 1], np.float32)]),
    Case("NonZero", [f32(2, 0)]),
    Case("Unique", [np.zeros(0, np.float32)], n_outputs=4),
    Case("TopK", [E, i64(2)], n_outputs=2),
    Case("TopK", [f32(2, 3), i64(0)], n_outputs=2, id="TopK-k0"),
    # creation
    Case("ConstantOfShape", [i64(2, 0)]),
    Case("Constant", [], {"value": onnx.numpy_helper.from_array(f32(0, 3))}),
    Case("RandomNormal", [], {"shape": [0, 3]}, ort_opset=1),
    Case("RandomUniform", [], {"shape": [2, 0]}, ort_opset=1),
    Case("HannWindow", [s(0, np.int64)]),
    Case("HammingWindow", [s(0, np.int64)]),
    Case("BlackmanWindow", [s(0, np.int64)]),
    Case("STFT", [f32(0, 16, 1), s(4, np.int64), None, s(8, np.int64)]),
    Case("Range", [s(3), s(3), s(1)]),
    Case("Range", [s(3, np.int64), s(1, np.int64), s(1, np.int64)], id="Range-neg", ort_opset=11),
    # linear algebra
    Case("MatMul", [f32(0, 3), f32(3, 4)]),
    Case("MatMul", [f32(2, 0), f32(0, 4)], id="MatMul-K0"),  # sums over nothing: zeros
    Case("MatMul", [f32(0, 2, 3), f32(3, 4)], id="MatMul-batch0"),
    Case("Gemm", [f32(0, 3), f32(3, 4), f32(4)]),
    Case("Gemm", [f32(2, 0), f32(0, 4), f32(4)], id="Gemm-K0"),  # C broadcast only
    Case("Einsum", [f32(0, 3), f32(3, 4)], {"equation": "ij,jk->ik"}),
    Case("Einsum", [f32(2, 0)], {"equation": "ij->i"}, id="Einsum-sum-empty"),
    Case("Einsum", [f32(3, 0), f32(0, 3)], {"equation": "ij,jk->"}, id="Einsum-scalar"),
    Case("Det", [f32(0, 2, 2)]),
    Case("MatMulInteger", [np.zeros((0, 3), np.uint8), np.ones((3, 2), np.uint8)]),
    # nn on an empty batch
    Case("Conv", [E4, f32(2, 3, 3, 3)]),
    Case("Conv", [E4, f32(2, 3, 1, 1)], id="Conv-1x1"),
    Case("Conv", [f32(0, 4, 3, 3), f32(4, 1, 3, 3)], {"group": 4}, id="Conv-depthwise"),
    Case(
        "Conv",
        [f32(0, 4, 3, 3), f32(4, 2, 1, 1)],
        {"group": 2, "strides": [2, 2]},
        id="Conv-1x1-grouped",
    ),
    Case("ConvTranspose", [E4, f32(3, 2, 3, 3)]),
    Case("AveragePool", [E4], {"kernel_shape": [2, 2]}),
    Case("MaxPool", [E4], {"kernel_shape": [2, 2]}),
    Case("LpPool", [E4], {"kernel_shape": [2, 2]}),
    Case("GlobalAveragePool", [E4]),
    Case("GlobalMaxPool", [E4]),
    Case("GlobalLpPool", [E4], ort_opset=2),
    Case("BatchNormalization", [E4, pos(3), f32(3), f32(3), pos(3)]),
    Case("InstanceNormalization", [E4, pos(3), f32(3)]),
    Case("LayerNormalization", [f32(0, 4), pos(4), f32(4)]),
    # onnxruntime expands GroupNormalization into Reshape(0, 3, -1), which it rejects
    # on an empty batch; the spec's output shape is the input's.
    Case("GroupNormalization", [E4, pos(3), f32(3)], {"num_groups": 3}, expected=[E4]),
    Case("RMSNormalization", [f32(0, 4), pos(4)]),
    Case("LpNormalization", [E]),
    Case("MeanVarianceNormalization", [E4]),
    Case("LRN", [E4], {"size": 3}),
    Case("Resize", [E4, None, np.array([1, 1, 2, 2], np.float32)]),
    Case("Upsample", [E4, np.array([1, 1, 2, 2], np.float32)], opset=9),
    Case("GridSample", [E4, f32(0, 2, 2, 2)]),
    Case("AffineGrid", [f32(0, 2, 3), i64(0, 1, 2, 2)]),
    Case(
        "RoiAlign",
        [f32(1, 3, 4, 4), f32(0, 4), i64()],
        {"output_height": 2, "output_width": 2},
        ort_opset=16,
    ),
    Case("MaxRoiPool", [f32(1, 3, 4, 4), f32(0, 5)], {"pooled_shape": [2, 2]}, ort_opset=1),
    Case("NonMaxSuppression", [f32(1, 0, 4), f32(1, 1, 0), i64(3)]),
    # random ops on an empty input: the shape is deterministic, the values are not drawn
    Case("RandomNormalLike", [E], ort_opset=1),
    Case("RandomUniformLike", [E], ort_opset=1),
    Case("Bernoulli", [pos(0, 3) * 0.5], ort_opset=15),
    # onnxruntime: "batch_size is < 1"; spec: (batch_size, sample_size) of `dtype` (int32)
    Case("Multinomial", [f32(0, 3)], {"sample_size": 2}, expected=[np.zeros((0, 2), np.int32)]),
    # more nn
    Case(
        "MaxUnpool",
        [f32(0, 3, 2, 2), np.zeros((0, 3, 2, 2), np.int64)],
        {"kernel_shape": [2, 2], "strides": [2, 2]},
    ),
    Case("DeformConv", [E4, f32(2, 3, 3, 3), f32(0, 18, 2, 2)], {"kernel_shape": [3, 3]}),
    Case("Col2Im", [f32(0, 4, 9), i64(4, 4), i64(2, 2)]),
    Case("ConvInteger", [np.zeros((0, 1, 3, 3), np.uint8), np.ones((2, 1, 2, 2), np.uint8)]),
    Case(
        "QLinearConv",
        [
            np.zeros((0, 1, 3, 3), np.uint8),
            s(0.1),
            np.array(0, np.uint8),
            np.ones((2, 1, 2, 2), np.uint8),
            s(0.1),
            np.array(0, np.uint8),
            s(0.2),
            np.array(0, np.uint8),
        ],
    ),
    Case("NegativeLogLikelihoodLoss", [f32(0, 3), np.zeros(0, np.int64)], {"reduction": "none"}),
    Case(
        "NegativeLogLikelihoodLoss",
        [f32(0, 3), np.zeros(0, np.int64)],
        {"reduction": "sum"},
        id="NLL-sum",
    ),
    # onnxruntime rejects N == 0 (its Reshape "product of 0"); spec: loss (N,) for
    # reduction "none", log_prob like the scores.
    Case(
        "SoftmaxCrossEntropyLoss",
        [f32(0, 3), np.zeros(0, np.int64)],
        {"reduction": "none"},
        n_outputs=2,
        expected=[f32(0), f32(0, 3)],
    ),
    Case("RNN", [f32(2, 0, 3), f32(1, 4, 3), f32(1, 4, 4)], {"hidden_size": 4}, n_outputs=2),
    # onnxruntime's GRU and LSTM abort the process on a batch of 0: spec shapes instead,
    # Y (seq, num_directions, batch, hidden) and Y_h / Y_c (num_directions, batch, hidden).
    Case(
        "GRU",
        [f32(2, 0, 3), f32(1, 12, 3), f32(1, 12, 4)],
        {"hidden_size": 4},
        n_outputs=2,
        expected=[f32(2, 1, 0, 4), f32(1, 0, 4)],
    ),
    Case(
        "LSTM",
        [f32(2, 0, 3), f32(1, 16, 3), f32(1, 16, 4)],
        {"hidden_size": 4},
        n_outputs=3,
        expected=[f32(2, 1, 0, 4), f32(1, 0, 4), f32(1, 0, 4)],
    ),
    Case("Attention", [f32(0, 2, 3, 4), f32(0, 2, 5, 4), f32(0, 2, 5, 4)]),
    # onnxruntime rejects a kv length of 0 and a 3-D batch of 0. Spec: softmax over no
    # keys is empty, and Y = P @ V sums over nothing, so Y is zeros (B, H, T, Dv).
    Case(
        "Attention",
        [f32(1, 2, 3, 4), f32(1, 2, 0, 4), f32(1, 2, 0, 4)],
        id="Attention-no-kv",
        expected=[np.zeros((1, 2, 3, 4), np.float32)],
    ),
    Case(
        "Attention",
        [f32(0, 3, 8), f32(0, 5, 8), f32(0, 5, 8)],
        id="Attention-3d",
        attrs={"q_num_heads": 2, "kv_num_heads": 2},
        expected=[f32(0, 3, 8)],
    ),
    Case("RotaryEmbedding", [f32(0, 2, 3, 4), f32(3, 2), f32(3, 2), np.zeros((0, 3), np.int64)]),
    Case("DFT", [f32(0, 8, 1), None, s(1, np.int64)]),
    Case("TensorScatter", [f32(0, 1, 4, 2), f32(0, 1, 2, 2)]),
    Case("BitCast", [E], {"to": onnx.TensorProto.INT32}),
    Case("SwiGLU", [f32(0, 4), f32(0, 4)], expected=[f32(0, 4)]),  # not in onnxruntime 1.32
    # Opset-27 state-space ops (not in onnxruntime 1.32). Spec: present_state keeps the
    # last k-1 positions of concat(past_state, input) (zeros when past_state is absent),
    # and LinearAttention over T = 0 tokens applies no update, so the state passes through.
    Case(
        "CausalConvWithState",
        [f32(0, 4, 5), f32(4, 1, 3)],
        n_outputs=2,
        expected=[f32(0, 4, 5), f32(0, 4, 2)],
    ),
    Case(
        "CausalConvWithState",
        [f32(2, 4, 0), f32(4, 1, 3), None, PAST_CONV],
        n_outputs=2,
        id="CausalConvWithState-L0",
        expected=[f32(2, 4, 0), PAST_CONV],
    ),
    Case(
        "LinearAttention",
        [f32(1, 0, 8), f32(1, 0, 8), f32(1, 0, 8), PAST_STATE],
        {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
        n_outputs=2,
        expected=[f32(1, 0, 8), PAST_STATE],
    ),
    Case("DynamicQuantizeLinear", [E], n_outputs=3),
    Case("Scatter", [f32(3, 4), np.zeros((3, 0), np.int64), f32(3, 0)], {"axis": 1}, opset=9),
    Case(
        "TfIdfVectorizer",
        [np.zeros((0,), np.int64)],
        {
            "mode": "TF",
            "min_gram_length": 1,
            "max_gram_length": 1,
            "max_skip_count": 0,
            "ngram_counts": [0],
            "ngram_indexes": [0, 1],
            "pool_int64s": [2, 3],
        },
    ),
    # quantization
    Case("QuantizeLinear", [E, s(0.1), np.array(0, np.uint8)], ort_opset=25),
    Case(
        "DequantizeLinear",
        [np.zeros((0, 3), np.uint8), s(0.1), np.array(3, np.uint8)],
        ort_opset=25,
    ),
    Case(
        "QLinearMatMul",
        [
            np.zeros((0, 3), np.uint8),
            s(0.1),
            np.array(0, np.uint8),
            np.ones((3, 2), np.uint8),
            s(0.1),
            np.array(0, np.uint8),
            s(0.2),
            np.array(0, np.uint8),
        ],
    ),
    # strings
    # onnxruntime rejects a 0-sized dim. Spec: "If all elements in X are dropped, the
    # output will be the empty value of string tensor with shape [1]" (onnx's reference
    # evaluator gives [""] too).
    Case(
        "StringNormalizer",
        [np.zeros(0, dtype=object)],
        {"case_change_action": "UPPER"},
        expected=[np.array([""], dtype=object)],
    ),
    Case("RegexFullMatch", [np.zeros((0, 2), dtype=object)], {"pattern": "a+"}),
    Case("StringSplit", [np.zeros((0, 2), dtype=object)], {"delimiter": ","}, n_outputs=2),
    Case("StringConcat", [np.zeros((0, 2), dtype=object), np.array(["x", "y"], dtype=object)]),
]


def case_id(c: Case) -> str:
    return c.id or c.op


def newest_opset(op: str) -> int:
    return onnx.defs.get_schema(op, onnx.defs.onnx_opset_version()).since_version


def same(a: Any, b: Any, where: str) -> None:
    if isinstance(b, list):  # a sequence output
        assert isinstance(a, list) and len(a) == len(b), f"{where}: sequence {a} != {b}"
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{k}]")
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{where}: shape {a.shape} != expected {b.shape}"
    assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} != expected {b.dtype}"
    if a.dtype == object:
        assert a.tolist() == b.tolist(), where
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=where)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_empty_input_matches_onnxruntime(case: Case) -> None:
    opset = case.opset or newest_opset(case.op)
    ours = run_node(case.op, case.inputs, case.n_outputs, opset=opset, **case.attrs)
    empties = [np.shape(x) for x in case.inputs if x is not None] + [
        np.shape(y) for y in ours if not isinstance(y, list)
    ]
    assert any(0 in sh for sh in empties), "a case must involve an empty tensor"
    if case.expected is not None:
        assert len(ours) == len(case.expected)
        for k, (a, b) in enumerate(zip(ours, case.expected, strict=True)):
            same(a, b, f"{case_id(case)} output {k} (spec)")
        return
    ort_opset = case.ort_opset or opset
    theirs = run_ort(case.op, case.inputs, case.n_outputs, opset=ort_opset, **case.attrs)
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        where = f"{case_id(case)} output {k}"
        if case.values:
            same(a, b, where)
        else:
            assert (a.shape, a.dtype) == (b.shape, b.dtype), where


# Ops that take tensors but have no empty case above, each with the reason.
NOT_COVERED = {
    # need a subgraph / sequence / optional value rather than a plain tensor input
    "If", "Loop", "Scan", "SequenceMap", "SequenceAt", "SequenceConstruct", "SequenceEmpty",
    "SequenceErase", "SequenceInsert", "SequenceLength", "ConcatFromSequence", "Optional",
    "OptionalGetElement", "OptionalHasElement",
    # image bytes / scalar-only inputs: no dimension that could be 0
    "ImageDecoder", "MelWeightMatrix",
    # onnxruntime's own default-domain op, no onnx schema for newest_opset to read
    # (tests/unit/ops/test_contrib_norm_act.py runs it against onnxruntime)
    "SimplifiedLayerNormalization",
}  # fmt: skip


def test_table_covers_most_registry_ops() -> None:
    ops = {h.op_type for h in all_handlers() if h.domain == ""}
    covered = {c.op for c in CASES}
    assert covered <= ops, covered - ops
    assert len(covered) >= 100
    assert not (covered & NOT_COVERED)
    assert ops - covered <= NOT_COVERED, sorted(ops - covered - NOT_COVERED)
