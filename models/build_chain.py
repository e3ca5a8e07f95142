"""Long single-path ONNX graphs for session-creation scaling (bench_create.py and the
complexity test in tests/unit/runtime/test_create_scaling.py).

    python models/build_chain.py 20000 chain20k.onnx [--ops MatMul,Add,Relu,Transpose]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# A mix that reaches the fusions (MatMul+Add, activations, elementwise chains), the
# no-op elimination (Identity, Reshape to its own shape) and shape folding.
DEFAULT_OPS = ("MatMul", "Add", "Relu", "Transpose", "Identity", "Sigmoid", "Shape", "Mul")


def chain_model(n: int, ops: Sequence[str] = DEFAULT_OPS, width: int = 4) -> onnx.ModelProto:
    """`n` ops applied one after another to x: float32[width, width] -> y (same type).

    "Shape" stands for the pair Shape -> Reshape (x reshaped to its own shape)."""
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    prev = "x"
    for i in range(n):
        out = f"v{i}" if i < n - 1 else "y"
        op = ops[i % len(ops)]
        if op in ("Add", "Mul", "MatMul"):
            shape = (width, width) if op == "MatMul" else (width,)
            # 1/width keeps a long MatMul chain finite
            c = np.full(shape, 1.0 / width, np.float32)
            inits.append(numpy_helper.from_array(c, f"c{i}"))
            nodes.append(helper.make_node(op, [prev, f"c{i}"], [out], name=f"n{i}"))
        elif op == "Transpose":
            nodes.append(helper.make_node(op, [prev], [out], name=f"n{i}", perm=[1, 0]))
        elif op == "Shape":
            nodes.append(helper.make_node("Shape", [prev], [f"s{i}"], name=f"s{i}"))
            nodes.append(helper.make_node("Reshape", [prev, f"s{i}"], [out], name=f"n{i}"))
        else:
            nodes.append(helper.make_node(op, [prev], [out], name=f"n{i}"))
        prev = out
    info = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, [width, width])
        for name in ("x", "y")
    ]
    g = helper.make_graph(nodes, f"chain{n}", info[:1], info[1:], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--ops", default=",".join(DEFAULT_OPS))
    args = ap.parse_args(argv)
    onnx.save(chain_model(args.n, args.ops.split(",")), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
