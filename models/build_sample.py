"""Build models/sample/mlp.onnx, the README's quick-start model, with onnx.helper only.

    python models/build_sample.py [OUT.onnx]

x float32[batch, 16] -> Gemm(16->32) -> Relu -> Gemm(32->32) -> Relu -> Gemm(32->10)
-> Softmax -> y float32[batch, 10]. Weights come from a fixed numpy seed and the
protobuf is written with fixed ir_version/opset and no timestamps, so rebuilding gives
the same bytes (the file is small enough to commit: ~9 KB).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent / "sample" / "mlp.onnx"
SIZES = (16, 32, 32, 10)  # input features, two hidden layers, classes
OPSET = 17
IR_VERSION = 8  # readable by onnxruntime >= 1.10


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    x = "x"
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(SIZES)):
        w = (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
        b = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
        inits += [
            numpy_helper.from_array(w, f"fc{i}.weight"),
            numpy_helper.from_array(b, f"fc{i}.bias"),
        ]
        out = f"fc{i}"
        nodes.append(
            helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"], [out], name=f"fc{i}/Gemm")
        )
        x = out
        if i < len(SIZES) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"relu{i}"], name=f"relu{i}"))
            x = f"relu{i}"
    nodes.append(helper.make_node("Softmax", [x], ["y"], name="softmax", axis=-1))
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", SIZES[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", SIZES[-1]])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="onnxexec/models/build_sample.py",
        ir_version=IR_VERSION,
    )
    model.doc_string = "3-layer MLP with random seeded weights: x[batch, 16] -> y[batch, 10]"
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(build().SerializeToString(deterministic=True))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
