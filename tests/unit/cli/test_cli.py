"""The CLI: outputs summarised, bad input -> one stderr line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper

from onnxexec.cli.main import cli
from tests.unit.helpers import make_model, tensor_info
from tests.unit.runtime.test_executor import TEST_OPSET

D = "onnxexec.test"


@pytest.fixture
def model_path(tmp_path):
    m = make_model(
        [helper.make_node("AddK", ["x"], ["y"], domain=D, k=1.0)],
        [tensor_info("x", shape=["batch", 3])],
        [tensor_info("y")],
        extra_opsets=[TEST_OPSET],
        producer_name="cli-test",
    )
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], obj={})


def test_run_with_npy_input_and_output_file(model_path, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    r = _run("run", model_path, "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "o.npz")
    assert r.exit_code == 0, r.output
    assert "y: float32[2, 3]  min 1  mean 1  max 1" in r.output
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], np.ones((2, 3)))


def test_run_synthesises_missing_inputs_using_dims(model_path):
    r = _run("run", model_path, "--dim", "batch=4", "--repeat", "3")
    assert r.exit_code == 0, r.output
    assert "synthesised random float32[4, 3]" in r.output
    assert "y: float32[4, 3]" in r.output and "latency over 3 runs" in r.output


def test_info_lists_producer_inputs_and_ops(model_path):
    r = _run("info", model_path, "--graph")
    assert r.exit_code == 0, r.output
    assert "producer: cli-test" in r.output and "x: tensor(float)[batch, 3]" in r.output
    assert "onnxexec.test::AddK" in r.output and "y = onnxexec.test::AddK(x; k=1.0)" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "/no/such/model.onnx"], "model file not found"),
        (["run", "{model}", "--input", "x={tmp}/missing.npy"], "input file not found"),
        (["run", "{model}", "--input", "q={tmp}/x.npy"], "unknown input name"),
        (["run", "{model}", "--input", "x={tmp}/x64.npy"], "expected tensor(float), got float64"),
        (["info", "{tmp}/garbage.onnx"], "not an ONNX model"),
    ],
)
def test_bad_input_gives_one_line_and_exit_1(model_path, tmp_path, args, message):
    np.save(tmp_path / "x.npy", np.zeros((1, 3), np.float32))
    np.save(tmp_path / "x64.npy", np.zeros((1, 3), np.float64))
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x07\xff\xff\xff not a model")
    r = _run(*[a.format(model=model_path, tmp=tmp_path) for a in args])
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnxexec: error:"), r.stderr
    assert message in lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_entry_point_error_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "onnxexec", "run", str(tmp_path / "nope.onnx")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"onnxexec: error: model file not found: {tmp_path / 'nope.onnx'}"
    ]


def test_verbose_shows_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "onnxexec", "run", "--verbose", str(tmp_path / "nope.onnx")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "Traceback" in proc.stderr
