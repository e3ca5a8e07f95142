"""Invalid ONNX models, one builder per family (test_validation.py runs each through
onnxruntime and onnxexec and requires both to refuse it at session creation).

Builders use onnx.helper without onnx.checker: every model here is malformed on
purpose. Each returns serialized bytes (some families only exist in the bytes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _vi(name: str, shape: list | None, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> bytes:
    g = helper.make_graph(
        nodes,
        "bad",
        inputs,
        outputs,
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def _w(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def conv(attrs: dict, x: list | None = None, w: tuple = (4, 3, 3, 3), b: int | None = None,
         op: str = "Conv") -> Callable[[], bytes]:  # fmt: skip
    def build() -> bytes:
        inits = {"w": _w(*w)}
        ins = ["x", "w"]
        if b is not None:
            inits["b"] = _w(b)
            ins.append("b")
        node = helper.make_node(op, ins, ["y"], name="conv0", **attrs)
        return _model([node], [_vi("x", x or [1, 3, 8, 8])], [_vi("y", None)], inits)

    return build


def pool(op: str, attrs: dict) -> Callable[[], bytes]:
    def build() -> bytes:
        node = helper.make_node(op, ["x"], ["y"], name="pool0", **attrs)
        return _model([node], [_vi("x", [1, 3, 8, 8])], [_vi("y", None)])

    return build


def batchnorm(c_scale: int = 3, c_mean: int = 3) -> bytes:
    inits = {"s": _w(c_scale), "b": _w(3), "m": _w(c_mean), "v": _w(3)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn0")
    return _model([node], [_vi("x", [1, 3, 4, 4])], [_vi("y", None)], inits)


def add_mixed_types() -> bytes:
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add0")
    return _model([node], [_vi("a", [2]), _vi("b", [2], TensorProto.DOUBLE)], [_vi("y", None)])


def relu_int_bool() -> bytes:  # a type outside the constraint's allowed list
    node = helper.make_node("Relu", ["a"], ["y"], name="relu0")
    return _model([node], [_vi("a", [2], TensorProto.BOOL)], [_vi("y", None)])


def duplicate_inputs() -> bytes:
    node = helper.make_node("Relu", ["a"], ["y"], name="relu0")
    return _model([node], [_vi("a", [2]), _vi("a", [2])], [_vi("y", None)])


def two_writers() -> bytes:
    nodes = [
        helper.make_node("Relu", ["a"], ["t"], name="r1"),
        helper.make_node("Neg", ["a"], ["t"], name="r2"),
        helper.make_node("Abs", ["t"], ["y"], name="r3"),
    ]
    return _model(nodes, [_vi("a", [2])], [_vi("y", None)])


def input_overwritten() -> bytes:
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="r1"),
        helper.make_node("Abs", ["a"], ["y"], name="r2"),
    ]
    return _model(nodes, [_vi("a", [2]), _vi("b", [2])], [_vi("y", None)])


def relu_three_inputs() -> bytes:
    node = helper.make_node("Relu", ["a", "a", "a"], ["y"], name="relu0")
    return _model([node], [_vi("a", [2])], [_vi("y", None)])


def relu_two_outputs() -> bytes:
    node = helper.make_node("Relu", ["a"], ["y", "z"], name="relu0")
    return _model([node], [_vi("a", [2])], [_vi("y", None), _vi("z", None)])


def add_one_input() -> bytes:
    node = helper.make_node("Add", ["a"], ["y"], name="add0")
    return _model([node], [_vi("a", [2])], [_vi("y", None)])


def empty_required_input() -> bytes:
    node = helper.make_node("Add", ["a", ""], ["y"], name="add0")
    return _model([node], [_vi("a", [2])], [_vi("y", None)])


def _branch(name: str, n_out: int, value: float = 1.0) -> onnx.GraphProto:
    nodes = [
        helper.make_node(
            "Constant", [], [f"{name}{i}"], value=helper.make_tensor("v", F, [1], [value])
        )
        for i in range(n_out)
    ]
    return helper.make_graph(nodes, name, [], [_vi(f"{name}{i}", [1]) for i in range(n_out)])


def if_float_condition() -> bytes:
    node = helper.make_node(
        "If", ["c"], ["y"], name="if0", then_branch=_branch("t", 1), else_branch=_branch("e", 1)
    )
    return _model([node], [_vi("c", [])], [_vi("y", None)])


def if_branch_counts() -> bytes:
    node = helper.make_node(
        "If", ["c"], ["y"], name="if0", then_branch=_branch("t", 1), else_branch=_branch("e", 2)
    )
    return _model([node], [_vi("c", [], TensorProto.BOOL)], [_vi("y", None)])


def loop_body_arity() -> bytes:
    # body needs (iter, cond, carried...) -> (cond, carried...); this one lacks cond out
    body = helper.make_graph(
        [helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v_in", [1])],
        [_vi("v_out", [1])],
    )
    node = helper.make_node("Loop", ["n", "", "v0"], ["v"], name="loop0", body=body)
    return _model([node], [_vi("n", [], TensorProto.INT64), _vi("v0", [1])], [_vi("v", None)])


def undefined_elem_type() -> bytes:
    node = helper.make_node("Relu", ["a"], ["y"], name="relu0")
    return _model([node], [_vi("a", [2], TensorProto.UNDEFINED)], [_vi("y", None)])


def opset_does_not_exist() -> bytes:
    node = helper.make_node("Relu", ["a"], ["y"], name="relu0")
    return _model([node], [_vi("a", [2])], [_vi("y", None)], opset=1000)


def initializer_short() -> bytes:
    t = numpy_helper.from_array(_w(4), "c")
    t.raw_data = t.raw_data[:12]  # 3 floats for a shape of 4
    node = helper.make_node("Add", ["a", "c"], ["y"], name="add0")
    g = helper.make_graph([node], "bad", [_vi("a", [4])], [_vi("y", None)], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def initializer_long_floats() -> bytes:
    t = TensorProto(name="c", data_type=F, dims=[2], float_data=[1.0, 2.0, 3.0])  # 3 for 2
    node = helper.make_node("Add", ["a", "c"], ["y"], name="add0")
    g = helper.make_graph([node], "bad", [_vi("a", [2])], [_vi("y", None)], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def scan_body_arity() -> bytes:
    # one state + one scan input: the body must take 2 inputs; this one takes 1
    body = helper.make_graph(
        [helper.make_node("Identity", ["s_in"], ["s_out"])],
        "body",
        [_vi("s_in", [1])],
        [_vi("s_out", [1])],
    )
    node = helper.make_node("Scan", ["s0", "xs"], ["s"], name="scan0", body=body, num_scan_inputs=1)
    return _model([node], [_vi("s0", [1]), _vi("xs", [3, 1])], [_vi("s", None)])


def ml_opset_does_not_exist() -> bytes:
    node = helper.make_node("Relu", ["a"], ["y"], name="relu0")
    g = helper.make_graph([node], "bad", [_vi("a", [2])], [_vi("y", None)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 99)]
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 8
    return m.SerializeToString()


def concat_empty_input() -> bytes:
    node = helper.make_node("Concat", ["a", "", "a"], ["y"], name="concat0", axis=0)
    return _model([node], [_vi("a", [2])], [_vi("y", None)])


CONV_X = [1, 3, 8, 8]
# family -> (builder, words the message must contain besides the node's name)
FAMILIES: dict[str, tuple[Callable[[], bytes], tuple[str, ...]]] = {
    "conv_negative_pads": (conv({"pads": [-1, 0, 0, 0]}), ("pads",)),
    "conv_transpose_negative_pads": (
        conv({"pads": [0, -1, 0, 0]}, w=(3, 4, 3, 3), op="ConvTranspose"),
        ("pads",),
    ),
    "maxpool_negative_pads": (
        pool("MaxPool", {"kernel_shape": [2, 2], "pads": [-1, 0, 0, 0]}),
        ("pads",),
    ),
    "averagepool_negative_pads": (
        pool("AveragePool", {"kernel_shape": [2, 2], "pads": [0, 0, -1, 0]}),
        ("pads",),
    ),
    "lppool_negative_pads": (
        pool("LpPool", {"kernel_shape": [2, 2], "pads": [0, 0, 0, -2]}),
        ("pads",),
    ),
    "conv_dilation_0": (conv({"dilations": [0, 1]}), ("dilations",)),
    "maxpool_dilation_0": (
        pool("MaxPool", {"kernel_shape": [2, 2], "dilations": [1, 0]}),
        ("dilations",),
    ),
    "conv_kernel_shape_0": (conv({"kernel_shape": [0, 3]}), ("kernel_shape",)),
    "maxpool_kernel_shape_0": (pool("MaxPool", {"kernel_shape": [0, 2]}), ("kernel_shape",)),
    "averagepool_kernel_negative": (
        pool("AveragePool", {"kernel_shape": [2, -2]}),
        ("kernel_shape",),
    ),
    "conv_strides_0": (conv({"strides": [1, 0]}), ("strides",)),
    "maxpool_strides_0": (
        pool("MaxPool", {"kernel_shape": [2, 2], "strides": [0, 1]}),
        ("strides",),
    ),
    "conv_pads_too_long": (conv({"pads": [0, 0, 0, 0, 0, 0]}), ("pads",)),
    "maxpool_pads_too_long": (
        pool("MaxPool", {"kernel_shape": [2, 2], "pads": [0] * 6}),
        ("pads",),
    ),
    "conv_kernel_shape_rank": (conv({"kernel_shape": [3, 3, 3]}), ("kernel_shape",)),
    "conv_bias_length": (conv({}, b=5), ("B",)),
    "conv_weight_channels": (conv({}, w=(4, 2, 3, 3)), ("W",)),
    "conv_group_channels": (conv({"group": 3}, w=(4, 1, 3, 3)), ("group",)),
    "batchnorm_scale_length": (lambda: batchnorm(c_scale=4), ("scale",)),
    "batchnorm_mean_length": (lambda: batchnorm(c_mean=2), ("mean",)),
    "add_float_double": (add_mixed_types, ("T",)),
    "relu_bool": (relu_int_bool, ("T",)),
    "duplicate_graph_inputs": (duplicate_inputs, ("'a'",)),
    "two_nodes_one_value": (two_writers, ("'t'",)),
    "graph_input_produced": (input_overwritten, ("'a'",)),
    "relu_three_inputs": (relu_three_inputs, ("input",)),
    "relu_two_outputs": (relu_two_outputs, ("output",)),
    "add_one_input": (add_one_input, ("input",)),
    "empty_required_input": (empty_required_input, ("input",)),
    "if_float_condition": (if_float_condition, ("cond",)),
    "if_branch_output_counts": (if_branch_counts, ("output",)),
    "loop_body_arity": (loop_body_arity, ("body",)),
    "undefined_element_type": (undefined_elem_type, ("'a'",)),
    "opset_does_not_exist": (opset_does_not_exist, ("opset",)),
    "scan_body_arity": (scan_body_arity, ("body",)),
    "ml_opset_does_not_exist": (ml_opset_does_not_exist, ("ai.onnx.ml", "opset 99")),
    "concat_empty_input": (concat_empty_input, ("input 1", "empty")),
    "conv_transpose_weight_channels": (
        conv({}, w=(4, 2, 3, 3), op="ConvTranspose"),
        ("W",),
    ),
    "initializer_too_short": (initializer_short, ("'c'",)),
    "initializer_too_many_floats": (initializer_long_floats, ("'c'",)),
}


# Families onnxruntime accepts at load but fails on at run time (its kernels check
# channels and inputs then); with the shapes declared, onnxexec refuses them up front.
ORT_FAILS_AT_RUN = {
    "conv_bias_length",
    "conv_weight_channels",
    "conv_group_channels",
    "conv_transpose_weight_channels",
    "concat_empty_input",
    "reshape_wrong_size",
}


def _clip_middle_empty() -> bytes:
    node = helper.make_node("Clip", ["a", "", "hi"], ["y"], name="clip0")
    return _model([node], [_vi("a", [3])], [_vi("y", None)], {"hi": np.array(1.0, np.float32)})


def _loop_with_scan_output() -> bytes:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "v_in"], ["v_out"]),
            helper.make_node("Identity", ["v_in"], ["scan"]),
        ],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v_in", [1])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("v_out", [1]), _vi("scan", [1])],
    )
    node = helper.make_node("Loop", ["n", "", "v0"], ["v", "s"], name="loop0", body=body)
    return _model(
        [node], [_vi("n", [], TensorProto.INT64), _vi("v0", [1])], [_vi("v", None), _vi("s", None)]
    )


def _if_bool() -> bytes:
    node = helper.make_node(
        "If",
        ["c"],
        ["y"],
        name="if0",
        then_branch=_branch("t", 1),
        else_branch=_branch("e", 1, 2.0),
    )
    return _model([node], [_vi("c", [], TensorProto.BOOL)], [_vi("y", None)])


# Near misses of the families above that are valid: both engines must load them.
VALID: dict[str, Callable[[], bytes]] = {
    "conv_zero_pads_group": conv({"pads": [0, 1, 0, 1], "group": 3}, w=(6, 1, 3, 3), b=6),
    "conv_transpose_bias": conv({"strides": [2, 2]}, w=(3, 2, 3, 3), b=2, op="ConvTranspose"),
    "maxpool_dilated": pool("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 1]}),
    "batchnorm": lambda: batchnorm(),
    "clip_middle_input_omitted": _clip_middle_empty,
    "loop_with_scan_output": _loop_with_scan_output,
    "if_bool": _if_bool,
    "reshape_zero_and_minus_one": lambda: _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape0")],
        [_vi("x", [2, 3, 4])],
        [_vi("y", None)],
        {"s": np.array([0, -1], np.int64)},
    ),
}


def _one(node: onnx.NodeProto, x: list, inits: dict | None = None, elem: int = F) -> bytes:
    return _model([node], [_vi("x", x, elem)], [_vi("y", None)], inits)


# Families only onnx's strict shape inference catches (validate_onnx.py): the words
# are those of onnx's message.
INFERRED: dict[str, tuple[Callable[[], bytes], tuple[str, ...]]] = {
    "reshape_wrong_size": (
        lambda: _one(
            helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape0"),
            [2, 3],
            {"s": np.array([4, 2], np.int64)},
        ),
        ("reshape0", "Reshape"),
    ),
    "transpose_bad_perm": (
        lambda: _one(helper.make_node("Transpose", ["x"], ["y"], name="t0", perm=[0, 0]), [2, 3]),
        ("t0", "Transpose"),
    ),
    "gather_axis_out_of_range": (
        lambda: _one(
            helper.make_node("Gather", ["x", "i"], ["y"], name="g0", axis=3),
            [2, 3],
            {"i": np.array([0], np.int64)},
        ),
        ("g0", "Gather"),
    ),
    "matmul_inner_dims": (
        lambda: _one(
            helper.make_node("MatMul", ["x", "w"], ["y"], name="mm0"), [2, 3], {"w": _w(4, 5)}
        ),
        ("mm0", "MatMul"),
    ),
    "concat_rank_mismatch": (
        lambda: _model(
            [helper.make_node("Concat", ["x", "z"], ["y"], name="cat0", axis=0)],
            [_vi("x", [2, 3]), _vi("z", [2])],
            [_vi("y", None)],
        ),
        ("cat0", "Concat"),
    ),
}
