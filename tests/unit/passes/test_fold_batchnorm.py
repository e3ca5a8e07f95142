from __future__ import annotations

import numpy as np

from onnxexec.passes.fold_batchnorm import fold_batchnorm
from tests.unit.passes._graphs import assert_same_outputs, graph, node, ops, rand


def _bn_inits() -> dict:
    rng = np.random.default_rng(7)
    return {
        "w": rand(4, 3, 3, 3),
        "cb": rand(4, seed=1),
        "s": rng.uniform(0.5, 2, 4).astype(np.float32),
        "bb": rand(4, seed=2),
        "mean": rand(4, seed=3),
        "var": rng.uniform(0.5, 2, 4).astype(np.float32),
    }


def test_conv_bn_folded() -> None:
    g = graph(
        [
            node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
            node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["y"], epsilon=1e-3),
        ],
        [("x", [1, 3, 6, 6])],
        ["y"],
        _bn_inits(),
    )
    out = fold_batchnorm(g)
    assert ops(out) == ["Conv"]
    i = _bn_inits()
    k = i["s"] / np.sqrt(i["var"] + np.float32(1e-3))  # BN as a per-channel affine map
    np.testing.assert_allclose(
        out.initializers[out.nodes[0].inputs[1]], i["w"] * k[:, None, None, None], rtol=1e-6
    )
    assert_same_outputs(g, out, {"x": rand(1, 3, 6, 6, seed=9)}, rtol=1e-5, atol=1e-5)


def test_shared_conv_output_not_folded() -> None:
    g = graph(
        [
            node("Conv", ["x", "w"], ["c"]),
            node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["y"]),
            node("Relu", ["c"], ["z"]),
        ],
        [("x", [1, 3, 5, 5])],
        ["y", "z"],
        _bn_inits(),
    )
    assert fold_batchnorm(g) is g
