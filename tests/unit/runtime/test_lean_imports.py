"""Sessions import only what their model uses: a model whose ops are all numpy never
loads numba (~60 MB), and the thread count set before numba loads still applies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

ML = "ai.onnx.ml"


def _model(path: Path, node: onnx.NodeProto, n_out: int = 1) -> str:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n_out])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)]
    )
    onnx.save(model, path)
    return str(path)


def _fresh(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_linear_regressor_session_never_imports_numba(tmp_path: Path) -> None:
    node = helper.make_node(
        "LinearRegressor", ["x"], ["y"], domain=ML, coefficients=[2.0, -1.0], intercepts=[0.5]
    )
    path = _model(tmp_path / "lin.onnx", node)
    res = _fresh(
        "import json, sys\n"
        "import numpy as np\n"
        "import onnxexec\n"
        f"s = onnxexec.InferenceSession({path!r})\n"
        "(y,) = s.run(None, {'x': np.array([[1.0, 3.0]], np.float32)})\n"
        "print(json.dumps({'y': y.tolist(), 'loaded': sorted(m for m in\n"
        "  ('numba', 'llvmlite', 'scipy.linalg') if m in sys.modules)}))\n"
    )
    assert res == {"y": [[-0.5]], "loaded": []}


def test_thread_count_set_before_numba_reaches_the_kernels(tmp_path: Path) -> None:
    node = helper.make_node("Scaler", ["x"], ["y"], domain=ML, offset=[1.0], scale=[2.0])
    path = _model(tmp_path / "scaler.onnx", node, n_out=2)
    res = _fresh(
        "import json, sys\n"
        "import numpy as np\n"
        "import onnxexec\n"
        "so = onnxexec.SessionOptions()\n"
        "so.intra_op_num_threads = 1\n"
        f"s = onnxexec.InferenceSession({path!r}, so)\n"
        "(y,) = s.run(None, {'x': np.array([[1.0, 3.0]], np.float32)})\n"
        "import numba\n"
        "from onnxexec.kernels import parallel\n"
        "print(json.dumps({'y': y.tolist(), 'numba': numba.get_num_threads(),\n"
        "  'pool': parallel.num_threads()}))\n"
    )
    assert res == {"y": [[0.0, 4.0]], "numba": 1, "pool": 1}


def test_normalizer_codes_match_the_kernel_module() -> None:
    from onnxexec.kernels import ml_scores
    from onnxexec.ops.ml_transforms import _NORMS

    assert _NORMS == {"MAX": ml_scores.NORM_MAX, "L1": ml_scores.NORM_L1, "L2": ml_scores.NORM_L2}


def test_fusion_pass_op_codes_are_the_kernel_module_s() -> None:
    from onnxexec.kernels import ewise, ewise_ops

    assert ewise.OPS is ewise_ops.OPS and ewise.BINARY is ewise_ops.BINARY
