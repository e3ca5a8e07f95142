"""Unmodified onnxruntime programs run on onnxexec through the import hook and the
`onnxexec as-onnxruntime` command, printing what they print on onnxruntime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from onnxexec.as_onnxruntime import ALIASES, OnnxruntimeFinder
from tests.unit.helpers import make_model, tensor_info

PROGRAMS = Path(__file__).parent / "programs"
ROOT = Path(__file__).resolve().parents[3]


def _classifier(path: Path) -> str:
    """softmax(x @ w + b): x float[batch, 4] -> probs float[batch, 3], with metadata."""
    rng = np.random.default_rng(1)
    m = make_model(
        [
            helper.make_node("Gemm", ["x", "w", "b"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
        ],
        [tensor_info("x", shape=["batch", 4])],
        [tensor_info("probs", shape=["batch", 3])],
        {"w": rng.standard_normal((4, 3)).astype(np.float32), "b": np.zeros(3, np.float32)},
        producer_name="unit-test",
    )
    helper.set_model_props(m, {"labels": "cat,dog,bird", "version": "3"})
    onnx.save(m, path)
    return str(path)


def _run(cmd: list[str], hooked: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    if hooked:
        cmd = [sys.executable, "-m", "onnxexec.as_onnxruntime", *cmd]
    else:
        cmd = [sys.executable, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("program", ["classify.py", "binding.py", "profile.py"])
def test_program_prints_the_same_on_onnxexec_as_on_onnxruntime(program, tmp_path):
    model = _classifier(tmp_path / "m.onnx")
    args = [str(PROGRAMS / program), model, str(tmp_path)]
    theirs, ours = _run(args, hooked=False), _run(args, hooked=True)
    assert theirs.pop("engine") == "onnxruntime"
    assert ours.pop("engine") == "onnxexec"
    assert ours == theirs


def test_cli_command_runs_a_program(tmp_path):
    model = _classifier(tmp_path / "m.onnx")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "onnxexec.cli.main", "as-onnxruntime", "--"]
    out = subprocess.run(
        [*cli, sys.executable, str(PROGRAMS / "classify.py"), model],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["engine"] == "onnxexec"
    failing = subprocess.run(
        [*cli, sys.executable, "-c", "raise SystemExit(3)"],
        capture_output=True,
        env=env,
        timeout=600,
    )
    assert failing.returncode == 3  # the program's exit code


def test_cli_command_keeps_a_sitecustomize_it_shadows(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.MARK = 'ran'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    code = "import builtins, onnxruntime as o; print(builtins.MARK, 'onnxexec' in o.__name__)"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnxexec.cli.main",
            "as-onnxruntime",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ran", "True"]


def test_hook_maps_only_onnxruntimes_api_modules():
    finder = OnnxruntimeFinder()
    for name in ALIASES:
        assert finder.find_spec(name) is not None
    assert finder.find_spec("numpy") is None
    with pytest.raises(ModuleNotFoundError, match=r"onnxruntime\.quantization"):
        finder.find_spec("onnxruntime.quantization")
