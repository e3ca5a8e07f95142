"""ONNXEXEC_DEBUG on the command line: node names (=1), shapes and dtypes (=2), on
stderr, without --verbose; unset, no per-node lines. Run in a fresh process because
the variable is read when the command starts and logging handlers are process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.unit.helpers import make_model, tensor_info

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def neg_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    m = make_model(
        [helper.make_node("Neg", ["x"], ["y"], name="the_neg")],
        [tensor_info("x", shape=[2, 3])],
        [tensor_info("y")],
    )
    folder = tmp_path_factory.mktemp("debug_env")
    onnx.save(m, folder / "neg.onnx")
    np.save(folder / "x.npy", np.ones((2, 3), np.float32))
    return folder / "neg.onnx", folder / "x.npy"


def _run(model: tuple[Path, Path], level: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ONNXEXEC_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    if level is not None:
        env["ONNXEXEC_DEBUG"] = level
    cmd = [sys.executable, "-m", "onnxexec", "run", str(model[0]), "--input", f"x={model[1]}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _node_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "the_neg" in ln]


def test_debug_1_logs_node_names_to_stderr(neg_model: tuple[Path, Path]) -> None:
    proc = _run(neg_model, "1")
    lines = _node_lines(proc.stderr)
    assert lines == ["onnxexec: the_neg (Neg)"], proc.stderr
    assert _node_lines(proc.stdout) == []


def test_debug_2_adds_shapes_and_dtypes(neg_model: tuple[Path, Path]) -> None:
    proc = _run(neg_model, "2")
    err = proc.stderr.splitlines()
    i = err.index("onnxexec: the_neg (Neg) <- float32[2, 3]")
    assert err[i + 1] == "onnxexec:   -> float32[2, 3]", proc.stderr


@pytest.mark.parametrize("level", [None, "0"])
def test_no_debug_lines_by_default(neg_model: tuple[Path, Path], level: str | None) -> None:
    proc = _run(neg_model, level)
    assert _node_lines(proc.stderr) == [], proc.stderr
