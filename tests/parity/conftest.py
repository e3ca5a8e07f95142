"""Shared fixtures for model-level parity tests.

- `tiny_models`: the tiny torch-exported models of models/build_models.py, built once
  per session into a tmp dir, and only those the collected tests ask for: a test
  parametrized with `model_name` (and optionally `exporter`, e.g. "dynamo" or
  "dynamo@23") declares its need. `tiny_models.get(name, exporter)` returns the file,
  its sidecar inputs and torch's outputs. Set ONNXEXEC_PARITY_MODELS=DIR to build into
  DIR and reuse it across runs (the builder skips files that already exist).
- `ort`: the onnxruntime module (skips when it is not installed).
- `parity_report`: `record(case, **numbers)`; rows are printed in the terminal summary.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "models" / "build_models.py"
EXPORTERS = ("torchscript", "dynamo")
_REPORT: list[tuple[str, dict[str, Any]]] = []


@dataclass(frozen=True)
class BuiltModel:
    """One exported model, its seeded sidecar inputs and torch's outputs on them."""

    name: str
    exporter: str  # "torchscript", "dynamo", or with an opset: "dynamo@23"
    path: Path
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]  # the torch module's outputs on `inputs`
    alt_inputs: dict[str, np.ndarray]  # another batch / sequence length
    alt_outputs: dict[str, np.ndarray]
    info: dict[str, Any]  # its models/build_models.py manifest entry


class TinyModels:
    def __init__(self, root: Path, log: str) -> None:
        self.root = root
        self.log = log
        manifest = root / "manifest.json"
        self.manifest = json.loads(manifest.read_text()) if manifest.exists() else {}

    def get(self, name: str, exporter: str) -> BuiltModel:
        """The built model, or a test failure carrying the exporter's error.

        `exporter` may carry an opset: "dynamo@23".
        """
        exp, _, op = exporter.partition("@")
        if exp == "dynamo" and importlib.util.find_spec("onnxscript") is None:
            pytest.skip("torch.onnx.export(dynamo=True) needs onnxscript (pip install onnxscript)")
        opset = int(op) if op else None
        found = [
            e
            for e in self.manifest.values()
            if (e["name"], e["exporter"], e.get("requested_opset")) == (name, exp, opset)
        ]
        if not found:
            pytest.fail(f"{name} ({exporter}) was not built; builder output:\n{self.log[-3000:]}")
        entry = found[0]
        if entry.get("error"):
            pytest.fail(f"torch export of {name} ({exporter}) failed: {entry['error'][:1500]}")

        def load(key: str) -> dict[str, np.ndarray]:
            with np.load(self.root / entry[key]) as z:
                return {k: z[k] for k in z.files}

        sidecars = [load(k) for k in ("inputs", "outputs", "alt_inputs", "alt_outputs")]
        return BuiltModel(name, exporter, self.root / entry["file"], *sidecars, entry)


def _missing_builder_deps() -> list[str]:
    return [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]


def _wanted_jobs(session: pytest.Session) -> list[str]:
    """'name:exporter[@opset]' for every collected test that uses `tiny_models`."""
    jobs: set[str] = set()
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "tiny_models" in getattr(item, "fixturenames", ()) and "model_name" in params:
            exporters = [params["exporter"]] if "exporter" in params else EXPORTERS
            jobs.update(f"{params['model_name']}:{e}" for e in exporters)
    return sorted(jobs)


def _all_built(root: Path, jobs: list[str]) -> bool:
    """True when an earlier run (ONNXEXEC_PARITY_MODELS) already built every job."""
    path = root / "manifest.json"
    if not path.exists():
        return False
    have = set()
    for e in json.loads(path.read_text()).values():
        op = e.get("requested_opset")
        files = [e.get(k) for k in ("file", "inputs", "outputs", "alt_inputs", "alt_outputs")]
        if not e.get("error") and all(f and (root / f).exists() for f in files):
            have.add(f"{e['name']}:{e['exporter']}" + (f"@{op}" if op else ""))
    return set(jobs) <= have


@pytest.fixture(scope="session")
def tiny_models(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> TinyModels:
    missing = _missing_builder_deps()
    if missing:
        pytest.skip(
            f"model parity tests build their models with torch + transformers; "
            f"not importable here: {', '.join(missing)} (pip install torch transformers onnxscript)"
        )
    env_dir = os.environ.get("ONNXEXEC_PARITY_MODELS")
    root = Path(env_dir) if env_dir else tmp_path_factory.mktemp("tiny_models")
    jobs = _wanted_jobs(request.session)
    if jobs and _all_built(root, jobs):
        return TinyModels(root, f"(reused {len(jobs)} models from {root})")
    cmd = [sys.executable, str(BUILD_SCRIPT), str(root), "--size", "tiny", "--verify"]
    if jobs:
        cmd += ["--only", *jobs]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    log = f"$ {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    numbers = {"seconds": round(time.perf_counter() - t0, 1), "jobs": len(jobs)}
    _REPORT.append(("build tiny models", numbers | {"exit": proc.returncode}))
    return TinyModels(root, log)


@pytest.fixture(scope="session")
def ort() -> ModuleType:
    return pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session")
def parity_report():
    def record(case: str, **numbers: Any) -> None:
        _REPORT.append((case, numbers))

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _REPORT:
        return
    terminalreporter.section("parity report")
    for case, numbers in _REPORT:
        cols = ", ".join(
            f"{k}={v:.2e}" if isinstance(v, float) and k.startswith("max") else f"{k}={v}"
            for k, v in numbers.items()
        )
        terminalreporter.write_line(f"{case}: {cols}")
