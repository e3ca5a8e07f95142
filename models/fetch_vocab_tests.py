"""Fetch llama.cpp's tokenizer test vocabularies (ggml-vocab-*.gguf + .inp/.out).

    python models/fetch_vocab_tests.py [--dest DIR] [--version X.Y.Z] [--force]

llama.cpp keeps, in models/, one vocabulary-only GGUF per tokenizer family together
with `<file>.inp` (test strings separated by lines `__ggml_vocab_test__`) and
`<file>.out` (the ids llama.cpp's test-tokenizer-0 expects, add_special=false,
parse_special=false). They are not committed here: the llama-cpp-python sdist on PyPI
vendors llama.cpp, so `pip download` of that sdist gets them through the ordinary
package client. The files are extracted flat into DIR (default
~/.cache/onnxexec/vocab, or $ONNXEXEC_VOCAB_DIR), together with llama.cpp's
src/unicode-data.cpp (the Unicode tables that models/gen_unicode_data.py turns into
onnxexec/llm/_unicode_tables.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# The sdist whose vendored llama.cpp the parity tests were written against. A newer one
# may add vocabularies (new pre-tokenizers) that onnxexec does not know yet.
DEFAULT_VERSION = "0.3.36"
MARKER = ".complete"
UNICODE_DATA = "unicode-data.cpp"


def vocab_dir() -> Path:
    """The cache folder: $ONNXEXEC_VOCAB_DIR or ~/.cache/onnxexec/vocab."""
    env = os.environ.get("ONNXEXEC_VOCAB_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "onnxexec" / "vocab"


def is_complete(dest: Path) -> bool:
    return (dest / MARKER).is_file() and any(dest.glob("ggml-vocab-*.gguf"))


def _download_sdist(version: str, tmp: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--no-binary",
        ":all:",
        f"llama-cpp-python=={version}",
        "-d",
        str(tmp),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"pip download llama-cpp-python=={version} failed: " + " | ".join(tail))
    found = sorted(tmp.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise RuntimeError(f"pip download left no llama_cpp_python sdist in {tmp}")
    return found[0]


def _wanted(name: str) -> str | None:
    """Flat output name for an sdist member we keep, else None."""
    parts = name.split("/")
    if len(parts) < 4 or parts[1:3] != ["vendor", "llama.cpp"]:
        return None
    rel = parts[3:]
    if len(rel) == 2 and rel[0] == "models" and rel[1].startswith("ggml-vocab-"):
        return rel[1]
    if rel == ["src", UNICODE_DATA]:
        return UNICODE_DATA
    return None


def fetch(dest: Path | None = None, version: str = DEFAULT_VERSION, force: bool = False) -> Path:
    """Make sure DEST holds the vocab test files; returns DEST. Raises RuntimeError."""
    dest = vocab_dir() if dest is None else dest
    if is_complete(dest) and not force:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="onnxexec-vocab-") as tmp:
        sdist = _download_sdist(version, Path(tmp))
        n = 0
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar:
                out = _wanted(member.name)
                if out is None or not member.isfile():
                    continue
                src = tar.extractfile(member)
                if src is None:
                    continue
                part = dest / (out + ".part")
                with src, open(part, "wb") as f:
                    while chunk := src.read(1 << 20):
                        f.write(chunk)
                part.replace(dest / out)
                n += 1
    if n == 0:
        raise RuntimeError(f"{sdist.name} holds no vendor/llama.cpp/models/ggml-vocab-* files")
    (dest / MARKER).write_text(f"llama-cpp-python=={version}\n")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=None, help="output folder (default: cache)")
    ap.add_argument("--version", default=DEFAULT_VERSION, help="llama-cpp-python sdist version")
    ap.add_argument("--force", action="store_true", help="download again even if present")
    args = ap.parse_args(argv)
    try:
        dest = fetch(args.dest, args.version, args.force)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    vocabs = sorted(p.name for p in dest.glob("ggml-vocab-*.gguf"))
    with_tests = [v for v in vocabs if (dest / (v + ".inp")).is_file()]
    print(f"{dest}: {len(vocabs)} vocabularies, {len(with_tests)} with test cases")
    for v in vocabs:
        print(("  [tests] " if v in with_tests else "          ") + v)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
