"""Codepoint properties exactly as llama.cpp's tokenizers see them.

llama.cpp (src/unicode.cpp) classifies codepoints with its own tables (one Unicode
release, see _unicode_tables.py) instead of the C++ locale, and its BPE vocabularies
store bytes through GPT-2's byte-to-unicode map. Both are reproduced here.
"""

from __future__ import annotations

import base64
import bisect
import functools
import zlib

import numpy as np

from onnxexec.llm import _unicode_tables as _t

# unicode_cpt_flags category bits (llama.cpp src/unicode.h); one per codepoint
UNDEFINED = 0x01
NUMBER = 0x02  # \p{N}
LETTER = 0x04  # \p{L}
SEPARATOR = 0x08  # \p{Z}
MARK = 0x10  # \p{M}
PUNCTUATION = 0x20  # \p{P}
SYMBOL = 0x40  # \p{S}
CONTROL = 0x80  # \p{C}
# not a category: set here for codepoints in WHITESPACE so one int carries both
WHITESPACE_BIT = 0x100

WHITESPACE = _t.WHITESPACE
MAX_CODEPOINT = 0x110000


def _rows(blob: str, n_rows: int, n_cols: int) -> np.ndarray:
    raw = zlib.decompress(base64.b85decode(blob))
    arr = np.frombuffer(raw, dtype="<u4").astype(np.int64).reshape(n_rows, n_cols).copy()
    arr[:, 0] = np.cumsum(arr[:, 0])
    return arr


@functools.cache
def category_table() -> bytes:
    """bytes of length 0x110000: the category bits of every codepoint."""
    rows = _rows(_t.FLAGS, _t.N_FLAGS, 2)
    starts, flags = rows[:, 0], rows[:, 1]
    lengths = np.diff(starts)  # last row is the (0x110000, 0) sentinel
    return np.repeat(flags[:-1].astype(np.uint8), lengths).tobytes()


@functools.cache
def _lower_map() -> dict[int, int]:
    rows = _rows(_t.LOWER, _t.N_LOWER, 2)
    return dict(zip(rows[:, 0].tolist(), rows[:, 1].tolist(), strict=True))


@functools.cache
def _nfd_ranges() -> tuple[list[int], list[int], list[int]]:
    rows = _rows(_t.NFD, _t.N_NFD, 3)
    return rows[:, 0].tolist(), rows[:, 1].tolist(), rows[:, 2].tolist()


def flags_of(cp: int) -> int:
    """Category bits of `cp`, plus WHITESPACE_BIT for llama.cpp whitespace."""
    f = category_table()[cp] if cp < MAX_CODEPOINT else UNDEFINED
    return f | WHITESPACE_BIT if cp in WHITESPACE else f


def flags_list(cps: list[int]) -> list[int]:
    """flags_of for every codepoint of a list (the hot path of pre-tokenization)."""
    table = category_table()
    ws = WHITESPACE
    return [table[c] | WHITESPACE_BIT if c in ws else table[c] for c in cps]


def tolower(cp: int) -> int:
    """Simple lowercase mapping (UnicodeData field 13), as llama.cpp's unicode_tolower."""
    return _lower_map().get(cp, cp)


def nfd_first(cp: int) -> int:
    """First codepoint of cp's NFD decomposition (llama.cpp unicode_cpts_normalize_nfd)."""
    firsts, lasts, nfds = _nfd_ranges()
    i = bisect.bisect_right(firsts, cp) - 1
    return nfds[i] if i >= 0 and firsts[i] <= cp <= lasts[i] else cp


def _gpt2_byte_map() -> list[str]:
    """GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68
    bytes to U+0100 upwards in byte order (llama.cpp unicode_byte_to_utf8_map)."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    out: list[str] = [""] * 256
    for b in keep:
        out[b] = chr(b)
    n = 0
    for b in range(256):
        if not out[b]:
            out[b] = chr(256 + n)
            n += 1
    return out


BYTE_TO_UNICODE: tuple[str, ...] = tuple(_gpt2_byte_map())
UNICODE_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_UNICODE)}
_BYTE_ENCODE_TABLE = {b: c for b, c in enumerate(BYTE_TO_UNICODE)}


def byte_encode(text: str) -> str:
    """UTF-8 bytes of `text`, each shown as its GPT-2 byte-level character."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1").translate(_BYTE_ENCODE_TABLE)


def utf8_len(lead: int) -> int:
    """Byte length of a UTF-8 sequence from its lead byte (llama.cpp unicode_len_utf8)."""
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[lead >> 4]
