"""Regenerate onnxexec/llm/_unicode_tables.py from llama.cpp's Unicode tables.

    python models/gen_unicode_data.py [--src unicode-data.cpp] [--out PATH]

llama.cpp classifies codepoints (\\p{L}, \\p{N}, whitespace, lowercase, NFD) with its
own tables, generated from one Unicode Character Database release, not from the
Python runtime's `unicodedata` (older) or the `regex` module's (newer). Tokenizer
parity needs exactly the same tables, so they are taken from the unicode-data.cpp
that models/fetch_vocab_tests.py extracts next to the vocab files, and stored as
zlib-compressed, delta-coded uint32 arrays.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fetch_vocab_tests import UNICODE_DATA, fetch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "onnxexec" / "llm" / "_unicode_tables.py"


def _section(src: str, name: str) -> str:
    start = src.index(name)
    return src[start : src.index("};", start)]


def _hex_tuples(section: str, width: int) -> list[tuple[int, ...]]:
    pat = r"\{" + r",\s*".join([r"0x([0-9A-Fa-f]+)"] * width) + r"\}"
    return [tuple(int(x, 16) for x in m) for m in re.findall(pat, section)]


def _blob(columns: list[list[int]]) -> str:
    """Delta-code each column, interleave row-major, zlib + base85."""
    arr = np.array(columns, dtype=np.int64).T
    arr[1:, 0] = np.diff(arr[:, 0])
    raw = arr.astype("<u4").tobytes()
    return base64.b85encode(zlib.compress(raw, 9)).decode("ascii")


def _wrap(name: str, text: str) -> str:
    lines = [text[i : i + 90] for i in range(0, len(text), 90)]
    body = "\n".join(f'    "{ln}"' for ln in lines)
    return f"{name} = (\n{body}\n)\n"


def _int_list(values: list[int]) -> str:
    """[*range(a, b), c, ...]: runs of consecutive values as ranges."""
    parts, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"*range(0x{values[i]:04X}, 0x{values[j] + 1:04X})")
        else:
            parts.extend(f"0x{v:04X}" for v in values[i : j + 1])
        i = j + 1
    return "[" + ", ".join(parts) + "]"


def generate(src_text: str) -> str:
    flags = _hex_tuples(_section(src_text, "unicode_ranges_flags"), 2)
    ws = sorted(
        int(x, 16)
        for x in re.findall(r"0x([0-9A-Fa-f]+)", _section(src_text, "unicode_set_whitespace"))
    )
    lower = _hex_tuples(_section(src_text, "unicode_map_lowercase"), 2)
    nfd = _hex_tuples(_section(src_text, "unicode_ranges_nfd"), 3)
    assert flags[0][0] == 0 and flags[-1][0] == 0x110000, "unexpected flags table"
    out = [
        '"""Unicode tables used by llama.cpp\'s tokenizers (generated; do not edit).\n\n'
        "Made by models/gen_unicode_data.py from llama.cpp src/unicode-data.cpp. Each blob\n"
        "is base85(zlib(uint32 little-endian rows)); the first column is delta-coded.\n"
        "FLAGS rows: (range start, flags) with llama.cpp's unicode_cpt_flags bits, a range\n"
        "lasting to the next start. LOWER rows: (codepoint, simple lowercase). NFD rows:\n"
        '(first, last, first codepoint of the NFD decomposition)."""\n',
        "from __future__ import annotations\n",
        f"WHITESPACE = frozenset({_int_list(ws)})\n",
        f"N_FLAGS, N_LOWER, N_NFD = {len(flags)}, {len(lower)}, {len(nfd)}\n",
        _wrap("FLAGS", _blob([[r[0] for r in flags], [r[1] for r in flags]])),
        _wrap("LOWER", _blob([[r[0] for r in lower], [r[1] for r in lower]])),
        _wrap("NFD", _blob([[r[0] for r in nfd], [r[1] for r in nfd], [r[2] for r in nfd]])),
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=None, help="llama.cpp src/unicode-data.cpp")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    src = args.src or fetch() / UNICODE_DATA
    args.out.write_text(generate(src.read_text(encoding="utf-8")))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
