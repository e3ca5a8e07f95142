"""The package's shape: module size budget and the one-way dependency rule.

STYLE.md: modules stay small (CI fails one over 600 lines) and dependencies point one
way, cli -> llm/runtime -> ops -> kernels, with loaders producing only IR. These checks
read the source with `ast`, so they import nothing and take milliseconds.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "onnxexec"
MAX_LINES = 600

# subpackage -> onnxexec subpackages it may import (its own is always allowed).
# `ir/passes` is the optimizer: constant folding runs op handlers and fusions name the
# kernels they lower to, so it sits above ops; the IR core below it imports neither.
ALLOWED: dict[str, set[str]] = {
    "kernels": set(),
    "ops": {"ir", "kernels", "errors"},
    "ir": {"errors"},
    "ir.passes": {"ir", "ops", "kernels", "errors"},
    # ggml_types reads the quant block tables (kernels/qtypes.py is data, no numba)
    "loaders": {"ir", "errors", "kernels.qtypes"},
    "runtime": {"ir", "loaders", "ops", "kernels", "errors"},
}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _layer(path: Path) -> str:
    parts = path.relative_to(PKG).parts
    if parts[:2] == ("ir", "passes"):
        return "ir.passes"
    return parts[0] if len(parts) > 1 else ""


def _onnxexec_imports(path: Path) -> set[str]:
    """Dotted names below `onnxexec.` that the module imports (absolute imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from onnxexec.kernels import qtypes` counts as onnxexec.kernels.qtypes
            names = [f"{node.module}.{a.name}" for a in node.names]
        found.update(n.removeprefix("onnxexec.") for n in names if n.startswith("onnxexec."))
    return found


def _allowed(layer: str, target: str) -> bool:
    own = layer.split(".")[0]
    if target == own or target.startswith(own + "."):
        return layer != "ir" or not target.startswith("ir.passes")
    return any(target == a or target.startswith(a + ".") for a in ALLOWED[layer])


def test_modules_within_line_budget() -> None:
    long = {
        str(p.relative_to(PKG)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by family): {long}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_dependencies_point_one_way(layer: str) -> None:
    bad = {
        f"{p.relative_to(PKG)} imports onnxexec.{t}"
        for p in _modules()
        if _layer(p) == layer
        for t in _onnxexec_imports(p)
        if not _allowed(layer, t)
    }
    assert not bad, sorted(bad)


def test_kernels_import_only_numeric_libraries() -> None:
    """kernels/ is numba and numpy only (plus llvmlite for intrinsics and the stdlib)."""
    third_party = {"numpy", "numba", "llvmlite"}
    bad = set()
    for p in _modules():
        if _layer(p) != "kernels":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = {node.module.split(".")[0]}
            else:
                continue
            for top in tops - third_party - {"onnxexec", "__future__"}:
                if top not in sys.stdlib_module_names:
                    bad.add(f"{p.relative_to(PKG)} imports {top}")
    assert not bad, sorted(bad)


def test_checker_sees_a_violation() -> None:
    """The rule itself can fail: an ops module importing the runtime is refused."""
    assert not _allowed("ops", "runtime.session")
    assert not _allowed("kernels", "ops.registry")
    assert not _allowed("ir", "ir.passes.cse")
    assert _allowed("ir.passes", "ops.registry")
    assert _allowed("loaders", "kernels.qtypes")
    assert not _allowed("loaders", "kernels.q4")
