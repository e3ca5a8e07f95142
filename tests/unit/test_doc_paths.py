"""Every repository path the documents mention exists (issue 27: stale references).

Reads README.md and every other tracked-style Markdown file (docs/*.md,
benchmarks/RESULTS.md, ...) and checks each path-looking word: `onnxexec/...`,
`tests/...`, `benchmarks/...`, `docs/...`, `models/...`, `tools/...`, `.ci/...`, and
package-relative ones such as `kernels/conv/` or `ops/llm_decode.py` (resolved under
onnxexec/). Globs (`ops/conv*.py`) must match at least one file. Text only: imports
nothing, takes milliseconds.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP = ("onnxexec", "tests", "benchmarks", "docs", "models", "tools", ".ci")
# onnxexec's subpackages: docs write `kernels/attn/` for onnxexec/kernels/attn/
SUBPACKAGES = tuple(
    sorted(p.name for p in (REPO / "onnxexec").iterdir() if (p / "__init__.py").is_file())
)
SKIP_DIRS = {".git", ".pytest_cache", "node_modules", "build", "dist", ".venv", "venv"}


def _path_pattern(roots: tuple[str, ...]) -> re.Pattern[str]:
    # a root, a slash, then path characters, ending on a word character or a slash
    # (trailing sentence punctuation is not part of the path)
    alts = "|".join(re.escape(r) for r in sorted(roots, key=len, reverse=True))
    return re.compile(rf"(?<![\w./-])((?:{alts})/(?:[\w.*/-]*[\w*/])?)")


PATH = _path_pattern(TOP + SUBPACKAGES)


def _documents() -> list[Path]:
    # hidden folders hold no project documents (.git, CI's .ci-venv with its packages)
    return sorted(
        p
        for p in REPO.rglob("*.md")
        if not SKIP_DIRS.intersection(p.relative_to(REPO).parts)
        and not any(part.startswith(".") for part in p.relative_to(REPO).parts[:-1])
    )


def _exists(path: str, repo: Path = REPO) -> bool:
    base = repo if path.split("/")[0] in TOP else repo / "onnxexec"
    if any(c in path for c in "*?["):
        return any(base.glob(path.rstrip("/")))
    return (base / path).exists()


def stale_paths(text: str, repo: Path = REPO) -> list[tuple[int, str]]:
    """(line, path) of each mentioned repository path that does not exist."""
    out = []
    for m in PATH.finditer(text):
        if not _exists(m.group(1), repo):
            out.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


def test_documents_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _documents()}
    assert {"README.md", "benchmarks/RESULTS.md", "docs/kernels.md"} <= names


def test_every_mentioned_path_exists() -> None:
    bad = [
        f"{doc.relative_to(REPO)}:{line}: {path}"
        for doc in _documents()
        for line, path in stale_paths(doc.read_text(encoding="utf-8"))
    ]
    assert not bad, "paths that do not exist:\n" + "\n".join(bad)


def test_check_sees_stale_paths() -> None:
    """The check can fail, on each form of path, and accepts the live ones."""
    text = (
        "See `onnxexec/ir/passes/fuse_llm.py` and (tests/unit/kernels/test_vmath.py).\n"
        "The kernels/vmath.py module, ops/conv_nope*.py and onnxexec/gone/.\n"
        "Live: onnxexec/ops/registry.py, kernels/conv/, ops/conv*.py, tests/unit/.\n"
    )
    assert [p for _, p in stale_paths(text)] == [
        "onnxexec/ir/passes/fuse_llm.py",
        "tests/unit/kernels/test_vmath.py",
        "kernels/vmath.py",
        "ops/conv_nope*.py",
        "onnxexec/gone/",
    ]
    assert stale_paths("a line\nthen docs/missing.md.\n") == [(2, "docs/missing.md")]
