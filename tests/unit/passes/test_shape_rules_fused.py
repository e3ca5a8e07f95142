"""The shape rules of onnxexec's fused ops agree with what their handlers produce when an
operand other than the first broadcasts the result (the class of bug that turned a
FusedElementwise of ((56,), (1, T, 56)) into a [56]-shaped value)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxexec.loaders.onnx_proto import load_onnx
from onnxexec.passes.shape_inference import infer_shapes
from tests.unit.passes._graphs import run

F = TensorProto.FLOAT
rng = np.random.default_rng(3)


def _case(op: str, shapes: list[tuple[int, ...]], **attrs):
    names = [f"i{k}" for k in range(len(shapes))]
    n = helper.make_node(op, names, ["y"], domain="onnxexec", **attrs)
    g = helper.make_graph(
        [n],
        "t",
        [helper.make_tensor_value_info(k, F, list(s)) for k, s in zip(names, shapes, strict=True)],
        [helper.make_tensor_value_info("y", F, None)],
    )
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("onnxexec", 1)]
    )
    feeds = {
        k: rng.standard_normal(s).astype(np.float32) for k, s in zip(names, shapes, strict=True)
    }
    return load_onnx(m), feeds


CASES = {
    "elementwise_bias_first": (
        "FusedElementwise",
        [(56,), (1, 23, 56)],
        {"program": (0, 2, 0, 1), "registers": 3, "result": 2},
    ),
    "elementwise_column": (
        "FusedElementwise",
        [(4, 1), (3, 1, 5)],
        {"program": (2, 2, 0, 1), "registers": 3, "result": 2},
    ),
    "gelu_bias": ("FusedGelu", [(2, 3, 8), (8,)], {}),
    "rotary_broadcast_tables": ("FusedRotary", [(1, 2, 3, 4), (3, 4), (1, 1, 3, 4)], {}),
    "matmul_rank_up_bias": ("FusedMatMul", [(3, 4), (4, 5), (2, 1, 5)], {}),
    "attention_mask": ("FusedAttention", [(1, 2, 3, 4), (1, 2, 4, 5), (1, 2, 5, 4), (3, 5)], {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_matches_handler(case: str) -> None:
    op, shapes, attrs = CASES[case]
    g, feeds = _case(op, shapes, **attrs)
    inferred = infer_shapes(g)["y"].shape
    (y,) = run(g, feeds)
    assert inferred == y.shape, f"{op}: rule {inferred}, handler {y.shape}"


def test_layernorm_skip_rule() -> None:
    g, feeds = _case("FusedLayerNorm", [(2, 3, 8), (8,), (8,), (2, 3, 8)])
    assert infer_shapes(g)["y"].shape == run(g, feeds)[0].shape == (2, 3, 8)
