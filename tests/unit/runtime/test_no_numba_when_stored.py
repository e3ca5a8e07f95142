"""Once a model's kernels are in the store, a fresh process creates and runs it without
importing numba (issue 21; ~100 MB of LLVM): a BERT-like encoder layer (fused linear
+ activation epilogue, fused elementwise GELU, layer norms, attention) and a
ResNet-like conv net. The first process, from an empty store, compiles and records;
outputs of both are checked against onnxruntime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.unit.runtime.test_ready_at_creation import _convnet  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
D, H, F = 32, 4, 64


def _encoder(path: Path) -> None:
    """One post-norm transformer encoder layer on x (B, T, D), B and T symbolic."""
    rng = np.random.default_rng(0)
    inits = []

    def w(name: str, *shape: int, scale: float = 0.2) -> str:
        arr = (rng.standard_normal(shape) * scale).astype(np.float32)
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def const(name: str, values: list[int]) -> str:
        inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    n = helper.make_node
    heads, merge = const("heads", [0, 0, H, D // H]), const("merge", [0, 0, D])
    nodes = [
        n("MatMul", ["x", w("wq", D, D)], ["q0"]),
        n("MatMul", ["x", w("wk", D, D)], ["k0"]),
        n("MatMul", ["x", w("wv", D, D)], ["v0"]),
        n("Reshape", ["q0", heads], ["q1"]),
        n("Reshape", ["k0", heads], ["k1"]),
        n("Reshape", ["v0", heads], ["v1"]),
        n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"]),
        n("Div", ["s0", w("sqrt_dh", 1, scale=0.0)], ["s1"]),
        n("Softmax", ["s1"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", merge], ["o2"]),
        n("MatMul", ["o2", w("wo", D, D)], ["o3"]),
        n("Add", ["o3", w("bo", D)], ["o4"]),
        n("Add", ["o4", "x"], ["r1"]),
        n("LayerNormalization", ["r1", w("ln1_g", D), w("ln1_b", D)], ["h"], axis=-1),
        n("MatMul", ["h", w("w1", D, F)], ["f0"]),
        n("Add", ["f0", w("c1", F)], ["f1"]),
        n("Div", ["f1", w("sqrt2", 1, scale=0.0)], ["g0"]),  # GELU: x/2 (1 + erf(x/√2))
        n("Erf", ["g0"], ["g1"]),
        n("Add", ["g1", w("one", 1, scale=0.0)], ["g2"]),
        n("Mul", ["f1", "g2"], ["g3"]),
        n("Mul", ["g3", w("half", 1, scale=0.0)], ["g4"]),
        n("MatMul", ["g4", w("w2", F, D)], ["f2"]),
        n("Add", ["f2", w("c2", D)], ["f3"]),
        n("Add", ["f3", "h"], ["r2"]),
        n("LayerNormalization", ["r2", w("ln2_g", D), w("ln2_b", D)], ["y"], axis=-1),
    ]
    fixed = {"sqrt_dh": np.sqrt(D // H), "sqrt2": np.sqrt(2.0), "one": 1.0, "half": 0.5}
    for i, t in enumerate(inits):
        if t.name in fixed:
            inits[i] = numpy_helper.from_array(np.array([fixed[t.name]], np.float32), t.name)
    graph = helper.make_graph(
        nodes,
        "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", D])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from onnxexec.runtime.session import InferenceSession
    out = {}
    for name, path, x in CASES:
        x = np.asarray(x, np.float32)
        out[name] = InferenceSession(path).run(None, {"x": x})[0].tolist()
    out["numba"] = "numba" in sys.modules
    print(json.dumps(out))
    """
)


def test_stored_kernels_run_without_numba(tmp_path: Path) -> None:
    enc, conv = tmp_path / "encoder.onnx", tmp_path / "conv.onnx"
    _encoder(enc)
    _convnet(conv)
    rng = np.random.default_rng(3)
    cases = [
        ("encoder", str(enc), rng.standard_normal((2, 7, D)).astype(np.float32).tolist()),
        ("conv", str(conv), rng.standard_normal((2, 3, 12, 12)).astype(np.float32).tolist()),
    ]
    code = f"CASES = {cases!r}\n" + CHILD
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env.update(ONNXEXEC_CACHE_DIR=str(tmp_path / "store"), PYTHONPATH=str(ROOT))

    def child() -> dict:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=1200)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.splitlines()[-1])

    cold, warm = child(), child()
    assert cold["numba"] and not warm["numba"]
    for name, path, x in cases:
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = ref.run(None, {"x": np.asarray(x, np.float32)})[0]
        for run in (cold, warm):
            np.testing.assert_allclose(np.asarray(run[name]), want, rtol=1e-4, atol=1e-4)
