"""The package's lazy exports are the functions and classes, whatever was imported first.

A submodule named like an export (llm/generate.py next to `generate`) rebinds the
package attribute to the module as soon as anything imports it, so
`from onnxexec.llm import generate` gave a module. A fresh interpreter per import
order shows it, since the first import decides.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

NAMES = ("LLM", "SamplingParams", "GenerationResult", "generate", "stream", "perplexity")


@pytest.mark.parametrize("first", ["onnxexec.llm.model", "onnxexec.cli.main", ""])
def test_exports_are_not_modules(first: str) -> None:
    code = (
        "import types\n"
        + (f"import {first}\n" if first else "")
        + f"from onnxexec.llm import {', '.join(NAMES)}\n"
        + f"print([n for n, v in zip({NAMES!r}, [{', '.join(NAMES)}])"
        + " if isinstance(v, types.ModuleType) or not callable(v)])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
