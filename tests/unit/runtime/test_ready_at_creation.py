"""An InferenceSession readies its kernels at creation (runtime/readying.py, issue 21):
from an empty store, runs after creation with new batch sizes and image sizes compile
nothing (numba's compile events, counted by kernels/objload/watch.py); a later process
creates and runs the same models without importing numba. Outputs are checked against
onnxruntime, so readying cannot pass by skipping work."""

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

from onnxexec.runtime import readying  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SIZES = [(1, 8), (3, 17), (7, 32), (32, 5)]  # (batch, image side): none of them 1, 2, 16


def _convnet(path: Path) -> None:
    """Conv -> Relu -> MaxPool -> GlobalAveragePool -> MatMul -> Softmax, batch and
    image size symbolic: conv, pooling and softmax kernels."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
        numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "g"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["a"]),
        helper.make_node("Flatten", ["a"], ["f"]),
        helper.make_node("MatMul", ["f", "g"], ["m"]),
        helper.make_node("Softmax", ["m"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from onnxexec.runtime import kernel_store
    from onnxexec.runtime.session import InferenceSession
    out = {}
    for name, path, shape in [("mlp", MLP, lambda n, s: (n, 16)),
                              ("conv", CONV, lambda n, s: (n, 3, s, s))]:
        sess = InferenceSession(path)
        created = kernel_store.compiles()
        rng = np.random.default_rng(1)
        results = []
        for n, s in SIZES:
            x = rng.standard_normal(shape(n, s)).astype(np.float32)
            results.append((x.tolist(), sess.run(None, {"x": x})[0].tolist()))
        out[name] = {"after": kernel_store.compiles() - created, "results": results}
    out["lazy"] = kernel_store.lazy_compiles()
    out["numba"] = "numba" in sys.modules
    print(json.dumps(out))
    """
)


def test_no_compile_after_creation_and_no_numba_when_stored(tmp_path: Path) -> None:
    conv = tmp_path / "conv.onnx"
    _convnet(conv)
    mlp = ROOT / "models" / "sample" / "mlp.onnx"
    code = f"MLP, CONV, SIZES = {str(mlp)!r}, {str(conv)!r}, {SIZES!r}\n" + CHILD
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", readying.ENV_VAR)}
    env.update(ONNXEXEC_CACHE_DIR=str(tmp_path / "store"), PYTHONPATH=str(ROOT))

    def child() -> dict:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=1200)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        assert "compiling kernel" not in out.stderr  # watch.py's lazy-compile line
        assert "RuntimeWarning" not in out.stderr  # readying's degenerate inputs are quiet
        return json.loads(out.stdout.splitlines()[-1])

    cold = child()  # an empty store: creation compiles, the runs after it must not
    assert cold["numba"] and cold["mlp"]["after"] == 0 and cold["conv"]["after"] == 0
    assert cold["lazy"] == 0
    warm = child()
    assert not warm["numba"] and warm["mlp"]["after"] == 0 and warm["conv"]["after"] == 0
    for name, path in (("mlp", mlp), ("conv", conv)):
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        for run in (cold, warm):
            for x, y in run[name]["results"]:
                want = ref.run(None, {"x": np.asarray(x, np.float32)})[0]
                np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-5)


def test_synthesized_inputs_follow_the_declared_types() -> None:
    from onnxexec.ir.graph import ValueInfo
    from onnxexec.ir.types import TensorType

    inputs = [
        ValueInfo("ids", TensorType(TensorProto.INT64, ("B", "T"))),
        ValueInfo("x", TensorType(TensorProto.FLOAT16, ("B", 4))),
        ValueInfo("m", TensorType(TensorProto.BOOL, (3,))),
    ]
    feed = readying.synthesize(inputs, 5)
    assert feed is not None
    assert feed["ids"].dtype == np.int64 and feed["ids"].shape == (5, 5)
    assert not feed["ids"].any()  # zeros: in range for any vocabulary or index
    assert feed["x"].dtype == np.float16 and feed["x"].shape == (5, 4)
    assert feed["m"].dtype == np.bool_ and feed["m"].shape == (3,)
    assert readying.synthesize([ValueInfo("u", TensorType(TensorProto.FLOAT, None))], 1) is None
