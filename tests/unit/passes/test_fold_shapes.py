from __future__ import annotations

import numpy as np

from onnxexec.passes.eliminate import eliminate_dead
from onnxexec.passes.fold_constants import fold_constants
from onnxexec.passes.fold_shapes import fold_shapes
from onnxexec.passes.shape_inference import infer_shapes
from onnxexec.passes.symdim import broadcast, div, mul
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand

I64 = np.int64


def _split_heads() -> object:
    """Reshape(x, Concat(Shape(x)[0], Shape(x)[1], [2], [3])) on x (batch, seq, 6)."""
    return graph(
        [
            node("Shape", ["x"], ["s"]),
            node("Gather", ["s", "i0"], ["b"], axis=0),
            node("Gather", ["s", "i1"], ["t"], axis=0),
            node("Unsqueeze", ["b", "ax"], ["b1"]),
            node("Unsqueeze", ["t", "ax"], ["t1"]),
            node("Concat", ["b1", "t1", "h", "d"], ["shape"], axis=0),
            node("Reshape", ["x", "shape"], ["y"]),
        ],
        [("x", ["batch", "seq", 6])],
        ["y"],
        {
            "i0": np.array(0, I64),
            "i1": np.array(1, I64),
            "ax": np.array([0], I64),
            "h": np.array([2], I64),
            "d": np.array([3], I64),
        },
    )


def test_symbolic_reshape_target_becomes_constant() -> None:
    g = _split_heads()
    out = eliminate_dead(fold_shapes(fold_constants(g)))
    assert ops(out) == ["Reshape"]
    np.testing.assert_array_equal(out.initializers[out.nodes[0].inputs[1]], [0, 0, 2, 3])
    for b, t in ((1, 5), (3, 2)):
        assert_same_outputs(g, out, {"x": rand(b, t, 6)})


def test_static_shape_chain_folds() -> None:
    g = graph(
        [node("Shape", ["x"], ["s"]), node("Cast", ["s"], ["f"], to=1)], [("x", [2, 7])], ["f"]
    )
    out = eliminate_dead(fold_constants(fold_shapes(g)))
    assert ops(out) == []
    np.testing.assert_array_equal(out.initializers["f"], np.float32([2, 7]))


def test_runtime_target_is_left_alone() -> None:
    g = graph([node("Reshape", ["x", "s"], ["y"])], [("x", [2, 3])], ["y"])
    # `s` is a graph input of unknown contents: nothing to fold
    g2 = graph([node("Reshape", ["x", "s"], ["y"])], [("x", [2, 3]), ("s", [2])], ["y"])
    assert fold_shapes(g2) is g2
    assert g is not None


def test_infer_shapes_symbolic() -> None:
    g = graph(
        [
            node("MatMul", ["x", "w"], ["h"]),
            node("Transpose", ["h"], ["ht"], perm=[1, 0, 2]),
            node("Add", ["ht", "bias"], ["y"]),
        ],
        [("x", ["b", "t", 4])],
        ["y"],
        {"w": rand(4, 5), "bias": rand(5)},
    )
    f = infer_shapes(g)
    assert f["h"].shape == ("b", "t", 5)
    assert f["y"].shape == ("t", "b", 5)
    assert f["y"].elem == 1


def test_symdim_algebra() -> None:
    assert mul("b", "t") == mul("t", "b") == "b*t"
    assert div(mul(12, "b*t"), "t") == "12*b"
    assert div("b", "t") is None
    assert broadcast("b", 1) == "b" and broadcast(1, 7) == 7
