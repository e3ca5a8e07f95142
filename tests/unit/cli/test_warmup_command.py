"""`onnxexec warmup MODEL...`: fills an empty store with the models' kernels (the
models side by side, with progress); a second run only checks the store (< 2 s of
CPU); fresh processes then run the models from the store without numba, at batch
sizes the warm-up did not use, matching onnxruntime; a broken model is one error line
and a non-zero exit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.unit.runtime.test_no_compile_new_sizes import _conv_model

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


RUN = (
    "import json, sys\n"
    "import numpy as np\n"
    "import onnxexec\n"
    "s = onnxexec.InferenceSession(sys.argv[1])\n"
    "x = np.array(json.loads(sys.argv[2]), np.float32)\n"
    "(y,) = s.run(None, {s.get_inputs()[0].name: x})\n"
    "print(json.dumps({'y': y.tolist(), 'numba': 'numba' in sys.modules}))\n"
)


def test_warmup_fills_the_store_then_is_a_no_op(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    conv = tmp_path / "conv.onnx"  # Conv, depthwise Conv, MaxPool, MatMul, Softmax
    conv.write_bytes(_conv_model())
    store = tmp_path / "store"
    _, out = _cli("warmup", str(MLP), str(conv), store=store)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0].startswith("warmup [0/2] readying 2 model(s) on ")
    ready = [ln for ln in lines if ": ready in " in ln]
    assert sorted(ln.split(": ready")[0].split()[-1] for ln in ready) == ["conv.onnx", "mlp.onnx"]
    assert ready[-1].startswith("warmup [2/2] ")
    assert out.stdout == ""

    took, again = _cli("warmup", str(MLP), str(conv), store=store)
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip() == "warmup: 2 model(s) ready, nothing to compile"
    assert took < 2.0

    rng = np.random.default_rng(0)
    env = {**os.environ, "ONNXEXEC_CACHE_DIR": str(store), "PYTHONPATH": str(ROOT)}
    for model, x in (
        (MLP, rng.standard_normal((3, 16))),
        (conv, rng.standard_normal((3, 3, 8, 8))),
    ):
        x = x.astype(np.float32)  # batch 3: the warm-up ran 1, 2 and 16
        run = subprocess.run([sys.executable, "-c", RUN, str(model), json.dumps(x.tolist())],
                             capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr
        res = json.loads(run.stdout.strip().splitlines()[-1])
        ref = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        expect = ref.run(None, {ref.get_inputs()[0].name: x})[0]
        np.testing.assert_allclose(res["y"], expect, rtol=2e-5, atol=2e-5)
        assert res["numba"] is False, model


def test_a_model_that_fails_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    _, out = _cli("warmup", str(bad), store=tmp_path / "store")
    assert out.returncode != 0
    errors = [ln for ln in out.stderr.splitlines() if "failed" in ln]
    assert len(errors) == 1 and str(bad) in errors[0], out.stderr


def test_no_model_lists_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No MODEL: ONNXEXEC_WARMUP_MODELS's files, folders (their *.onnx / *.gguf) and
    globs, each once, in order; with none, a usage error that names the variable."""
    from click.testing import CliRunner

    from onnxexec.cli.main import cli
    from onnxexec.cli.warmup import ENV_VAR, default_models

    (tmp_path / "zoo").mkdir()
    for name in ("b.onnx", "a.gguf", "notes.txt"):
        (tmp_path / "zoo" / name).write_text("")
    (tmp_path / "one.onnx").write_text("")
    listed = os.pathsep.join(
        [str(tmp_path / "one.onnx"), str(tmp_path / "zoo"), str(tmp_path / "zoo" / "*.onnx"),
         str(tmp_path / "missing.onnx")]
    )  # fmt: skip
    assert default_models(listed) == [
        str(tmp_path / "one.onnx"),
        str(tmp_path / "zoo" / "a.gguf"),
        str(tmp_path / "zoo" / "b.onnx"),
    ]
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv(ENV_VAR, raising=False)
    out = CliRunner().invoke(cli, ["warmup"])
    assert out.exit_code == 2 and ENV_VAR in out.output and "is not set" in out.output
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing.onnx"))
    out = CliRunner().invoke(cli, ["warmup"])
    assert out.exit_code == 2 and "names no model file" in out.output
