"""Sessions import only what their model uses: a model whose ops are all numpy never
loads numba (~60 MB), a model whose kernels are in the store doesn't either, the thread
count set before numba loads still applies, and importing onnxexec sets no
environment variable."""

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


def _fresh(code: str, *args: str, cwd: Path | None = None, **env_vars: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    for key, value in env_vars.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    if cwd is not None:  # the source tree stays importable from elsewhere
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[3]), *sys.path])
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True, text=True, env=env, timeout=600, cwd=cwd,
    )  # fmt: skip
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
        "from onnxexec.native import parallel\n"
        "print(json.dumps({'y': y.tolist(), 'numba': numba.get_num_threads(),\n"
        "  'pool': parallel.num_threads()}))\n"
    )
    assert res == {"y": [[0.0, 4.0]], "numba": 1, "pool": 1}


def test_normalizer_codes_match_the_kernel_module() -> None:
    from onnxexec.kernels.ml import ml_scores
    from onnxexec.ops.ml_transforms import _NORMS

    assert _NORMS == {"MAX": ml_scores.NORM_MAX, "L1": ml_scores.NORM_L1, "L2": ml_scores.NORM_L2}


def test_fusion_pass_op_codes_are_the_kernel_module_s() -> None:
    from onnxexec.kernels.math import ewise, ewise_ops

    assert ewise.OPS is ewise_ops.OPS and ewise.BINARY is ewise_ops.BINARY


def test_import_sets_no_environment_and_sessions_tune_openmp(tmp_path: Path) -> None:
    """GOMP_SPINCOUNT is set where threads are configured (session creation), not by
    importing onnxexec, and never over a user's OMP_WAIT_POLICY."""
    node = helper.make_node("Scaler", ["x"], ["y"], domain=ML, offset=[1.0], scale=[2.0])
    path = _model(tmp_path / "scaler.onnx", node, n_out=2)
    code = (
        "import json, os\n"
        "before = dict(os.environ)\n"
        "import onnxexec, onnxexec.runtime.threads, onnxexec.runtime.session\n"
        "after_import = dict(os.environ) == before\n"
        f"onnxexec.InferenceSession({path!r})\n"
        "print(json.dumps([after_import, os.environ.get('GOMP_SPINCOUNT')]))\n"
    )
    assert _fresh(code, GOMP_SPINCOUNT=None) == [True, "10000"]
    assert _fresh(code, GOMP_SPINCOUNT=None, OMP_WAIT_POLICY="PASSIVE") == [True, None]


def _tree_model(path: Path) -> str:
    # y = 1.5 if x0 <= 0.5 else (-2.0 if x1 <= 2.0 else 4.0)
    node = helper.make_node(
        "TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=1,
        nodes_treeids=[0, 0, 0, 0, 0], nodes_nodeids=[0, 1, 2, 3, 4],
        nodes_featureids=[0, 0, 1, 0, 0], nodes_values=[0.5, 0.0, 2.0, 0.0, 0.0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_truenodeids=[1, 0, 3, 0, 0], nodes_falsenodeids=[2, 0, 4, 0, 0],
        target_treeids=[0, 0, 0], target_nodeids=[1, 3, 4], target_ids=[0, 0, 0],
        target_weights=[1.5, -2.0, 4.0],
    )  # fmt: skip
    return _model(path, node)


RUN_TWICE = (
    "import json, sys\n"
    "import numpy as np\n"
    "import onnxexec\n"
    "s = onnxexec.InferenceSession(sys.argv[1])\n"
    "x = np.array(json.loads(sys.argv[2]), np.float32)\n"
    "(y,) = s.run(None, {s.get_inputs()[0].name: x})\n"
    "print(json.dumps({'y': y.tolist(), 'numba': 'numba' in sys.modules}))\n"
)


def test_warm_store_runs_mlp_and_trees_without_numba(tmp_path: Path) -> None:
    """A fresh store: the first process compiles what it needs and records it; the
    next process, whatever its working directory, imports no numba."""
    import numpy as np
    import onnxruntime as ort

    mlp = str(Path(__file__).parents[3] / "models" / "sample" / "mlp.onnx")
    x_mlp = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    x_tree = np.array([[0.2, 9.0], [0.9, 1.0], [0.9, 3.0]], np.float32)
    env = {"ONNXEXEC_CACHE_DIR": str(tmp_path / "store")}
    for model, x in ((mlp, x_mlp), (_tree_model(tmp_path / "tree.onnx"), x_tree)):
        ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {
            ort.InferenceSession(model).get_inputs()[0].name: x})[0]  # fmt: skip
        for cwd in (tmp_path, Path("/")):
            res = _fresh(RUN_TWICE, model, json.dumps(x.tolist()), cwd=cwd, **env)
            np.testing.assert_allclose(res["y"], ref, rtol=1e-5, atol=1e-6)
        assert not res["numba"], model  # the second process found every kernel stored
