"""WordPiece (tokenizer.ggml.model "bert"), as llm_tokenizer_wpm_session.

BertNormalizer-like preprocessing splits the text into words (whitespace separates,
punctuation, ASCII symbols and CJK ideographs stand alone; control characters are
dropped; optional lowercase and accent stripping). Each word, prefixed with U+2581 as
the GGUF converter stores word starts, is matched greedily longest-first; a word with
an unmatched position becomes the unknown token.
"""

from __future__ import annotations

from onnxexec.errors import GGUFError
from onnxexec.llm.trie import Trie
from onnxexec.llm.unicode_props import (
    CONTROL,
    MARK,
    PUNCTUATION,
    SYMBOL,
    WHITESPACE_BIT,
    flags_of,
    nfd_first,
    tolower,
)
from onnxexec.llm.vocab import SPACE_ESCAPE, Vocab

# CJK ranges of llm_tokenizer_wpm_session::is_chinese_char (0x2B920 as in HF's code)
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def wpm_words(text: str, lowercase: bool, strip_accents: bool) -> list[str]:
    """llm_tokenizer_wpm_session::preprocess."""
    words = [""]
    for ch in text:
        cp = nfd_first(ord(ch)) if strip_accents else ord(ch)
        f = flags_of(cp)
        if f & WHITESPACE_BIT:
            if words[-1]:
                words.append("")
            continue
        if cp == 0 or cp == 0xFFFD or f & CONTROL or (strip_accents and f & MARK):
            continue
        s = chr(tolower(cp) if lowercase else cp)
        if f & PUNCTUATION or (cp < 0x7F and f & SYMBOL) or _is_cjk(cp):
            if words[-1]:
                words.append("")
            words[-1] = s
            words.append("")
        else:
            words[-1] += s
    if not words[-1]:
        words.pop()
    return words


class WpmEncoder:
    """Text fragment -> ids, for one WordPiece vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.trie = Trie()
        for text, tid in vocab.token_to_id.items():
            self.trie.add(map(ord, text), tid)

    def encode(self, text: str) -> list[int]:
        v = self.vocab
        out: list[int] = []
        for word in wpm_words(text, v.lowercase, v.strip_accents):
            w = [ord(c) for c in SPACE_ESCAPE + word]
            n = len(w)
            ids: list[int] = []
            i = 0
            while i < n:
                longest = None  # the longest vocabulary entry starting at i
                for longest in self.trie.matches(w, i):  # noqa: B007
                    pass
                if longest is None:
                    ids = []  # an unmatched position discards the whole word
                    break
                i, tid = longest
                ids.append(tid)
            if not ids:
                if v.ids["unk"] is None:
                    raise GGUFError("WPM vocabulary has no unknown token")
                ids = [v.ids["unk"]]
            out.extend(ids)
        return out
