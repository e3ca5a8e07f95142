"""fold_transposes: tf2onnx-style layout Transposes around convs cancel; other
permutations (attention's head transposes) are left where the exporter put them.
Results against onnxruntime on the unoptimized model."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.passes import optimize
from onnxexec.passes.fold_transposes import fold_transposes, layout_perm
from tests.unit.passes._graphs import ops, rand, run

node = helper.make_node
ort = pytest.importorskip("onnxruntime")
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _model(nodes, inputs, inits, outputs=("y",)):
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _same_as_ort(m, g, feeds):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    for got, w in zip(run(g, feeds), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)


def test_nhwc_conv_block_keeps_only_the_input_transpose() -> None:
    """x (NHWC) -> T -> Conv -> T -> Clip -> T -> Conv -> T -> Add(., skip) -> T -> Relu."""
    m = _model(
        [
            node("Transpose", ["x"], ["a"], perm=TO_NCHW),
            node("Conv", ["a", "w1"], ["c1"], pads=[1, 1, 1, 1]),
            node("Transpose", ["c1"], ["h1"], perm=TO_NHWC),
            node("Clip", ["h1", "lo", "hi"], ["r1"]),
            node("Transpose", ["r1"], ["a2"], perm=TO_NCHW),
            node("Conv", ["a2", "w2"], ["c2"]),
            node("Transpose", ["c2"], ["h2"], perm=TO_NHWC),
            node("Add", ["h2", "r1"], ["s"]),
            node("Transpose", ["s"], ["a3"], perm=TO_NCHW),
            node("Relu", ["a3"], ["y"]),
        ],
        [("x", [1, 6, 5, 4])],
        {"w1": rand(4, 4, 3, 3), "w2": rand(4, 4, 1, 1, seed=1), "lo": np.float32(0),
         "hi": np.float32(6)},
    )  # fmt: skip
    g = optimize(load_onnx(m), 99)
    assert ops(g).count("Transpose") == 1 and "Clip" not in ops(g) and "Add" not in ops(g)
    _same_as_ort(m, g, {"x": rand(1, 6, 5, 4, seed=2, scale=4)})


def test_transpose_with_a_second_reader_is_not_moved_through_unary() -> None:
    m = _model(
        [
            node("Transpose", ["x"], ["t"], perm=TO_NHWC),
            node("Relu", ["t"], ["y"]),
        ],
        [("x", [1, 3, 4, 5])],
        {},
        outputs=("y", "t"),
    )
    g = fold_transposes(load_onnx(m))
    assert ops(g) == ["Transpose", "Relu"]


def test_attention_transposes_stay() -> None:
    m = _model(
        [
            node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
            node("Relu", ["t"], ["r"]),
            node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3]),
        ],
        [("x", [2, 3, 4, 5])],
        {},
    )
    g = fold_transposes(load_onnx(m))
    assert ops(g) == ["Transpose", "Relu", "Transpose"]


def test_merged_non_identity_pair() -> None:
    """NHWC -> NCHW -> (channels first again) composes into one Transpose."""
    m = _model(
        [
            node("Transpose", ["x"], ["t"], perm=TO_NCHW),
            node("Transpose", ["t"], ["y"], perm=TO_NCHW),
        ],
        [("x", [2, 3, 4, 5])],
        {},
    )
    g = optimize(load_onnx(m), 1)  # the inner one is left dead: eliminate_dead drops it
    assert ops(g) == ["Transpose"] and tuple(g.nodes[0].attrs["perm"]) == (0, 2, 3, 1)
    _same_as_ort(m, g, {"x": rand(2, 3, 4, 5)})


def test_layout_perm() -> None:
    assert layout_perm((0, 2, 3, 1)) and layout_perm((0, 3, 1, 2)) and layout_perm((0, 2, 1))
    assert not layout_perm((0, 2, 1, 3)) and not layout_perm((0, 1, 3, 2))
