"""`onnxexec warmup MODEL`: fills an empty store with the model's kernels, showing
progress; a second run only checks the store (< 2 s of CPU); a fresh process then runs the
model from the store without numba, matching onnxruntime; a broken model is one
error line and a non-zero exit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[3]
MLP = ROOT / "models" / "sample" / "mlp.onnx"


def _cli(*args: str, store: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env.update(ONNXEXEC_CACHE_DIR=str(store), PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-m", "onnxexec.cli.main", *args],
        capture_output=True, text=True, env=env, timeout=900, cwd=ROOT,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds, not wall time: on the shared 2-core CI machine a process waits for
    # a core longer than it runs
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, out


def test_warmup_fills_the_store_then_is_a_no_op(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    store = tmp_path / "store"
    _, out = _cli("warmup", str(MLP), store=store)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0].startswith("warmup [0/1] readying 1 model(s) on ")
    assert any(ln.startswith("warmup [1/1] mlp.onnx: ready in ") for ln in lines), lines
    assert out.stdout == ""

    took, again = _cli("warmup", str(MLP), store=store)
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip() == "warmup: 1 model(s) ready, nothing to compile"
    assert took < 2.0

    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    code = (
        "import json, sys\n"
        "import numpy as np\n"
        "import onnxexec\n"
        f"s = onnxexec.InferenceSession({str(MLP)!r})\n"
        f"x = np.array({x.tolist()!r}, np.float32)\n"
        "(y,) = s.run(None, {s.get_inputs()[0].name: x})\n"
        "print(json.dumps({'y': y.tolist(), 'numba': 'numba' in sys.modules}))\n"
    )
    env = {**os.environ, "ONNXEXEC_CACHE_DIR": str(store), "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout.strip().splitlines()[-1])
    ref = ort.InferenceSession(str(MLP), providers=["CPUExecutionProvider"])
    expect = ref.run(None, {ref.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(res["y"], expect, rtol=1e-5, atol=1e-6)
    assert res["numba"] is False


def test_a_warmed_conv_model_runs_new_sizes_without_numba(tmp_path: Path) -> None:
    """Conv, depthwise conv, pooling, MatMul, Softmax: after `warmup`, a fresh process
    runs batch sizes the warm-up did not use from the store alone."""
    ort = pytest.importorskip("onnxruntime")
    from tests.unit.runtime.test_no_compile_new_sizes import _conv_model

    model = tmp_path / "conv.onnx"
    model.write_bytes(_conv_model())
    store = tmp_path / "store"
    _, out = _cli("warmup", str(model), store=store)
    assert out.returncode == 0, out.stderr
    x = np.random.default_rng(0).standard_normal((3, 3, 8, 8)).astype(np.float32)
    code = (
        "import json, sys\n"
        "import numpy as np\n"
        "import onnxexec\n"
        f"s = onnxexec.InferenceSession({str(model)!r})\n"
        f"x = np.array({x.tolist()!r}, np.float32)\n"
        "(y,) = s.run(None, {'x': x})\n"
        "print(json.dumps({'y': y.tolist(), 'numba': 'numba' in sys.modules}))\n"
    )
    env = {**os.environ, "ONNXEXEC_CACHE_DIR": str(store), "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout.strip().splitlines()[-1])
    ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(res["y"], ref.run(None, {"x": x})[0], rtol=2e-5, atol=2e-5)
    assert res["numba"] is False


def test_a_model_that_fails_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    _, out = _cli("warmup", str(bad), store=tmp_path / "store")
    assert out.returncode != 0
    errors = [ln for ln in out.stderr.splitlines() if "failed" in ln]
    assert len(errors) == 1 and str(bad) in errors[0], out.stderr
