"""A small stateful model with control flow, shaped like a voice-activity detector:
one LSTM step over a feature frame, then a chain of If nodes whose branches are ~30
tiny ops each (constants, elementwise, activations, a reduction), as torch.jit
exports of such detectors look. Used by benchmarks/bench_overhead.py.

    python models/build_stateful.py out.onnx [--ifs 20] [--ops 30] [--hidden 64]
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_CYCLE = ("Mul", "Add", "Tanh", "Sub", "Relu", "Sigmoid")


def _branch(
    k: int, side: str, n_ops: int, hidden: int, rng: np.random.Generator
) -> onnx.GraphProto:
    """n_ops tiny ops on the outer `y{k}` and `h_out`, ending in b{k}{side}: [1, hidden]."""
    tag = f"{side}{k}_"
    nodes: list[onnx.NodeProto] = []
    prev = f"y{k}"
    for i in range(n_ops - 2):
        out = f"{tag}v{i}"
        op = _CYCLE[(i + (side == "e")) % len(_CYCLE)]
        if op in ("Mul", "Add", "Sub"):
            c = (rng.standard_normal(hidden) * 0.3).astype(np.float32)
            const = numpy_helper.from_array(c, f"{tag}c{i}")
            # Constant nodes in the branch, as torch exports put them there
            nodes.append(helper.make_node("Constant", [], [f"{tag}k{i}"], value=const))
            nodes.append(helper.make_node(op, [prev, f"{tag}k{i}"], [out]))
        else:
            nodes.append(helper.make_node(op, [prev], [out]))
        prev = out
    nodes.append(helper.make_node("Add", [prev, "h_out2d"], [f"{tag}mix"]))
    nodes.append(helper.make_node("Tanh", [f"{tag}mix"], [f"b{k}{side}"]))
    out = helper.make_tensor_value_info(f"b{k}{side}", TensorProto.FLOAT, [1, hidden])
    return helper.make_graph(nodes, f"{tag}branch", [], [out])


def stateful_model(n_ifs: int = 20, n_ops: int = 30, hidden: int = 64, feat: int = 64):
    """x [1, 1, feat], h/c [1, 1, hidden] -> prob [1, 1], h_out, c_out."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((1, 4 * hidden, feat)) * 0.1).astype(np.float32), "W"
        ),
        numpy_helper.from_array(
            (rng.standard_normal((1, 4 * hidden, hidden)) * 0.1).astype(np.float32), "R"
        ),
        numpy_helper.from_array(np.zeros((1, 8 * hidden), np.float32), "B"),
        numpy_helper.from_array(np.array([1, hidden], np.int64), "shape2d"),
        numpy_helper.from_array((rng.standard_normal((hidden, 1)) * 0.2).astype(np.float32), "Wo"),
    ]
    nodes = [
        helper.make_node(
            "LSTM",
            ["x", "W", "R", "B", "", "h", "c"],
            ["seq", "h_out", "c_out"],
            hidden_size=hidden,
        ),
        helper.make_node("Reshape", ["h_out", "shape2d"], ["h_out2d"]),
        helper.make_node("Identity", ["h_out2d"], ["y0"]),
    ]
    for k in range(n_ifs):
        thr = numpy_helper.from_array(np.array(0.02 * (k - n_ifs / 2), np.float32), f"thr{k}")
        inits.append(thr)
        nodes.append(helper.make_node("ReduceMean", [f"y{k}"], [f"m{k}"], keepdims=0))
        nodes.append(helper.make_node("Greater", [f"m{k}", f"thr{k}"], [f"cond{k}"]))
        nodes.append(
            helper.make_node(
                "If",
                [f"cond{k}"],
                [f"y{k + 1}"],
                then_branch=_branch(k, "t", n_ops, hidden, rng),
                else_branch=_branch(k, "e", n_ops, hidden, rng),
            )
        )
    nodes.append(helper.make_node("MatMul", [f"y{n_ifs}", "Wo"], ["logit"]))
    nodes.append(helper.make_node("Sigmoid", ["logit"], ["prob"]))

    def f(name: str, shape: list[int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    state = [1, 1, hidden]
    g = helper.make_graph(
        nodes,
        "stateful",
        [f("x", [1, 1, feat]), f("h", state), f("c", state)],
        [f("prob", [1, 1]), f("h_out", state), f("c_out", state)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--ifs", type=int, default=20)
    ap.add_argument("--ops", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=64)
    args = ap.parse_args(argv)
    onnx.save(stateful_model(args.ifs, args.ops, args.hidden), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
