from __future__ import annotations

import numpy as np

from onnxexec.ir.graph import Graph
from onnxexec.passes.fuse_matmul import fuse_matmul
from onnxexec.passes.prepack import blas_ready, prepack
from tests.unit.passes._graphs import assert_same_outputs, graph, node, rand


def _with_weight(g: Graph, name: str, w: np.ndarray) -> Graph:
    return Graph(
        g.nodes,
        g.inputs,
        g.outputs,
        dict(g.initializers, **{name: w}),
        g.value_info,
        g.opset_imports,
    )


def test_strided_weight_materialized_once() -> None:
    g = graph(
        [node("MatMul", ["x", "w"], ["a"]), node("MatMul", ["a", "w"], ["y"])],
        [("x", [3, 4])],
        ["y"],
        {"w": rand(4, 4)},
    )
    strided = rand(4, 8, seed=1)[:, ::2]  # a folded Slice: neither C nor F contiguous
    g = fuse_matmul(_with_weight(g, "w", strided))
    assert not blas_ready(strided)
    out = prepack(g)
    packed = {n.inputs[1] for n in out.nodes}
    assert len(packed) == 1 and "w" not in packed
    assert blas_ready(out.initializers[packed.pop()])
    assert_same_outputs(g, out, {"x": rand(3, 4, seed=2)})


def test_contiguous_and_transposed_weights_untouched() -> None:
    g = graph([node("MatMul", ["x", "w"], ["y"])], [("x", [3, 4])], ["y"], {"w": rand(4, 5)})
    assert prepack(g) is g
    gt = _with_weight(g, "w", rand(5, 4).T)  # F-contiguous: sgemm reads it transposed
    assert prepack(gt) is gt
