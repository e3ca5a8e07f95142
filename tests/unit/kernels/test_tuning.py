"""kernels/tuning.py is the one table of path thresholds: every entry is read by the
code, each has a comment, and the table imports nothing (numba-free, cheap to import).
Reads source text only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "onnxexec"
TABLE = PKG / "kernels" / "tuning.py"


def _entries() -> dict[str, int]:
    """name -> line of each module-level constant in the table."""
    tree = ast.parse(TABLE.read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node.lineno
    return out


def test_table_has_entries_and_imports_only_typing() -> None:
    assert len(_entries()) >= 40
    tree = ast.parse(TABLE.read_text(encoding="utf-8"))
    modules = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)} | {
        a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names
    }
    assert modules <= {"__future__", "typing"}, modules


def test_every_entry_is_read_by_the_code() -> None:
    code = "\n".join(p.read_text(encoding="utf-8") for p in PKG.rglob("*.py") if p != TABLE)
    unused = [n for n in _entries() if not re.search(rf"\btuning\.{n}\b", code)]
    assert not unused, f"tuning.py entries nothing reads: {unused}"


def test_every_entry_is_explained() -> None:
    """A comment on the entry's line, or above it: a comment block directly above the
    group of entries (no blank line between) it belongs to."""
    lines = TABLE.read_text(encoding="utf-8").splitlines()
    bare = []
    for name, line in _entries().items():
        if "#" in lines[line - 1]:
            continue
        above = line - 2
        while above >= 0 and re.match(r"[A-Z0-9_]+: Final", lines[above]):
            above -= 1  # the group's earlier entries
        if above < 0 or not lines[above].lstrip().startswith("#"):
            bare.append(name)
    assert not bare, f"entries without a comment: {bare}"
