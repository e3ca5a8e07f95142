"""fold_pad and the "any producer" fusions of issue 26: an explicit Pad folded into the
Conv / pool after it, and Conv / Gemm fused whatever produced their input (a Pad, a
Resize, an op without a shape rule). Results against onnxruntime on the unoptimized
model (an independent implementation) and against level 0."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.passes import optimize
from onnxexec.passes.fold_pad import fold_pad
from onnxexec.passes.shape_inference import infer_shapes
from tests.unit.passes._graphs import ops, rand, run

node = helper.make_node
ort = pytest.importorskip("onnxruntime")


def _model(nodes, x_shape, inits, opset=17, outputs=("y",)):
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _check(m, level: int, x: np.ndarray, atol: float = 1e-4):
    """The optimized graph; its outputs equal onnxruntime's on the original model."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})
    g = optimize(load_onnx(m), level)
    for got, w in zip(run(g, {"x": x}), want, strict=True):
        assert got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=atol)
    return g


def test_hf_mobilenet_block_pad_depthwise_clip() -> None:
    """transformers' MobileNetV2: TF 'SAME' padding as a Pad, ReLU6 as a Clip node."""
    pads = np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)  # stride 2: pad the end only
    m = _model(
        [
            node("Pad", ["x", "pads", "zero"], ["p"], mode="constant"),
            node("Conv", ["p", "w", "b"], ["c"], group=8, strides=[2, 2], kernel_shape=[3, 3]),
            node("Clip", ["c", "zero", "six"], ["y"]),
        ],
        (1, 8, 9, 9),
        {"pads": pads, "zero": np.float32(0), "six": np.float32(6), "w": rand(8, 1, 3, 3),
         "b": rand(8, seed=1)},
    )  # fmt: skip
    g = _check(m, 99, rand(1, 8, 9, 9, seed=2, scale=3))
    assert ops(g) == ["FusedConv"]
    a = g.nodes[0].attrs
    assert a["activation"] == "Clip" and (a["alpha"], a["beta"]) == (0.0, 6.0)
    assert tuple(a["pads"]) == (0, 0, 1, 1)


def test_resize_then_conv_is_fused_and_laid_out() -> None:
    """An FPN head: Resize x2 -> 3x3 conv + Relu (the conv whose input came from a Resize
    stayed a numpy Conv with an OIHW weight)."""
    m = _model(
        [
            node("Resize", ["x", "", "scales"], ["u"], mode="nearest"),
            node("Conv", ["u", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            node("Relu", ["c"], ["y"]),
        ],
        ("batch", 16, 6, 7),
        {"scales": np.array([1, 1, 2, 2], np.float32), "w": rand(8, 16, 3, 3),
         "b": rand(8, seed=1)},
    )  # fmt: skip
    g = _check(m, 99, rand(2, 16, 6, 7, seed=3))
    assert ops(g) == ["Resize", "FusedConv"] and g.nodes[1].attrs["activation"] == "Relu"
    facts = infer_shapes(g)
    assert facts["u"].shape[1:] == (16, 12, 14) and facts["y"].shape[1:] == (8, 12, 14)


def test_gemm_after_an_op_without_shape_rule() -> None:
    """The Gemm's weight says float32 when its input's producer (Einsum) is unknown."""
    m = _model(
        [
            node("Einsum", ["x"], ["e"], equation="ij->ij"),
            node("Gemm", ["e", "w", "c"], ["h"], transB=1),
            node("HardSigmoid", ["h"], ["y"]),
        ],
        (3, 5),
        {"w": rand(4, 5), "c": rand(4, seed=1)},
    )
    g = _check(m, 2, rand(3, 5, seed=2))
    assert ops(g) == ["Einsum", "FusedMatMul"] and g.nodes[1].attrs["activation"] == "HardSigmoid"


@pytest.mark.parametrize(
    ("window", "value", "extra", "folds"),
    [
        ("MaxPool", -np.inf, {}, True),
        ("MaxPool", 0.0, {}, False),  # padded zeros can be the max
        ("AveragePool", 0.0, {"count_include_pad": 0}, True),  # its own pads are 0
        ("AveragePool", 0.0, {"pads": [1, 1, 1, 1]}, False),  # own pads not counted
        ("AveragePool", 0.0, {"pads": [1, 1, 1, 1], "count_include_pad": 1}, True),
        ("AveragePool", 1.0, {}, False),
        ("AveragePool", 0.0, {"ceil_mode": 1}, False),
    ],
)
def test_pad_into_pools(window: str, value: float, extra: dict, folds: bool) -> None:
    m = _model(
        [
            node("Pad", ["x", "pads", "v"], ["p"]),
            node(window, ["p"], ["y"], kernel_shape=[3, 3], strides=[2, 2], **extra),
        ],
        (1, 3, 8, 7),
        {"pads": np.array([0, 0, 1, 2, 0, 0, 2, 0], np.int64), "v": np.float32(value)},
    )
    g = _check(m, 2, rand(1, 3, 8, 7, seed=4))
    assert ops(g) == ([window] if folds else ["Pad", window])


def test_pad_axes_input_and_shared_pad() -> None:
    """Opset 18's axes input; a Pad read by two convs folds into both."""
    m = _model(
        [
            node("Pad", ["x", "pads", "", "axes"], ["p"]),
            node("Conv", ["p", "w1"], ["y"]),
            node("Conv", ["p", "w2"], ["z"], strides=[2, 2]),
        ],
        (1, 2, 5, 5),
        {"pads": np.array([1, 0, 1, 2], np.int64), "axes": np.array([-2, -1], np.int64),
         "w1": rand(3, 2, 3, 3), "w2": rand(4, 2, 3, 3, seed=1)},
        opset=18,
        outputs=("y", "z"),
    )  # fmt: skip
    g = _check(m, 2, rand(1, 2, 5, 5, seed=5))
    assert ops(g) == ["FusedConv", "FusedConv"]


@pytest.mark.parametrize(
    "pads",
    [
        [0, 1, 1, 1, 0, 0, 1, 1],  # a channel pad
        [0, 0, 1, -1, 0, 0, 1, 1],  # a crop
    ],
)
def test_pad_that_is_not_a_conv_pad_stays(pads: list[int]) -> None:
    c = 3 if pads[1] else 2
    m = _model(
        [node("Pad", ["x", "pads"], ["p"]), node("Conv", ["p", "w"], ["y"])],
        (1, 2, 5, 5),
        {"pads": np.array(pads, np.int64), "w": rand(3, c, 3, 3)},
    )
    g = fold_pad(load_onnx(m))
    assert ops(g) == ["Pad", "Conv"]
    _check(m, 2, rand(1, 2, 5, 5, seed=6))


def test_zero_pad_is_removed() -> None:
    m = _model(
        [node("Pad", ["x", "pads"], ["p"], mode="reflect"), node("Relu", ["p"], ["y"])],
        (1, 2, 5, 5),
        {"pads": np.zeros(8, np.int64)},
    )
    assert ops(_check(m, 1, rand(1, 2, 5, 5))) == ["Relu"]


def test_conv_after_an_op_without_shape_rule_gets_an_ohwi_weight_at_run_time() -> None:
    """Einsum has no shape rule: conv_layout cannot choose the conv's path at planning,
    so the FusedConv's prepared state keeps an OHWI copy for the tap / row kernels."""
    from onnxexec.ops.fused_linear import ConvState
    from onnxexec.runtime.executor import execute
    from onnxexec.runtime.plan import plan_graph

    m = _model(
        [
            node("Einsum", ["x"], ["e"], equation="nchw->nchw"),
            node("Conv", ["e", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            node("Relu", ["c"], ["y"]),
        ],
        (1, 32, 12, 20),
        {"w": rand(24, 32, 3, 3), "b": rand(24, seed=1)},
    )
    g = _check(m, 99, rand(1, 32, 12, 20, seed=7))
    plan = plan_graph(g)
    x = rand(1, 32, 12, 20, seed=8)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(2):  # the second run reuses the copy (and the recorded job)
        np.testing.assert_allclose(
            execute(plan, {"x": x})[0], want.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4
        )
    states = [s.kwargs.get("prepared") for s in plan.steps]
    conv = next(s for s in states if isinstance(s, ConvState))
    assert conv.w_ohwi is not None
