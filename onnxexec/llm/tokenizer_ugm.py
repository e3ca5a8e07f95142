"""SentencePiece unigram (tokenizer.ggml.model "t5"), as llm_tokenizer_ugm_session.

The text is first normalized with the model's precompiled character map (an XOR-
compressed double array trie of byte sequences -> replacement strings, from the
SentencePiece model), spaces become U+2581 (optionally collapsed, with a leading one
added); then a Viterbi pass over the UTF-8 bytes picks the tokenization with the
highest sum of token scores. A character no token covers becomes the unknown token
(score min_score - 10), and runs of unknowns collapse into one.
"""

from __future__ import annotations

import struct
import sys

from onnxexec.llm.token_attrs import TokenAttr
from onnxexec.llm.trie import Trie
from onnxexec.llm.unicode_props import utf8_len
from onnxexec.llm.vocab import SPACE_ESCAPE, Vocab

_UNKNOWN_PENALTY = 10.0
_REPLACEMENT = "\ufffd".encode()


def _valid_char_len(data: bytes, pos: int) -> int:
    """Length of the UTF-8 character at pos, 0 if invalid (unicode_cpt_from_utf8)."""
    b = data[pos]
    n = 1 if b < 0x80 else 0 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    if n == 4 and b >= 0xF8:
        return 0
    if n == 0 or pos + n > len(data):
        return 0
    return n if all(data[pos + k] & 0xC0 == 0x80 for k in range(1, n)) else 0


class CharsMap:
    """The precompiled_charsmap: u32 blob size, XCDA entries, NUL-terminated strings."""

    def __init__(self, raw: bytes) -> None:
        (size,) = struct.unpack_from("<I", raw, 0)
        if size + 4 >= len(raw):
            raise ValueError("precompiled_charsmap: XCDA blob larger than the map")
        self.xcda = list(struct.unpack_from(f"<{size // 4}I", raw, 4))
        self.strings = raw[4 + size :]

    def _node(self, i: int) -> int:
        if i >= len(self.xcda):
            raise ValueError("precompiled_charsmap: XCDA index out of range")
        return self.xcda[i]

    def _base(self, i: int) -> int:
        node = self._node(i)
        return (node >> 10) << ((node & (1 << 9)) >> 6)

    def longest(self, data: bytes, pos: int) -> tuple[int, bytes]:
        """(matched length, replacement) of the longest mapped prefix at pos, or (0, b"")."""
        best_len, best_off = 0, 0
        index = self._base(0)
        for p in range(pos, len(data)):
            c = data[p]
            if c == 0:
                break
            index ^= c
            node = self._node(index)
            if node & ((1 << 31) | 0xFF) != c:  # LCHECK: not a child of the previous node
                break
            leaf = (node >> 8) & 1
            index ^= self._base(index)
            if leaf:
                best_len = p - pos + 1
                best_off = self._node(index) & ((1 << 31) - 1)
        if not best_len:
            return 0, b""
        end = self.strings.find(b"\0", best_off)
        if best_off >= len(self.strings) or end < 0:
            raise ValueError("precompiled_charsmap: bad replacement string offset")
        return best_len, self.strings[best_off:end]


class UgmEncoder:
    """Text fragment -> ids, for one unigram vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.charsmap = CharsMap(vocab.charsmap) if vocab.charsmap else None
        self.pieces = Trie()
        self.user_prefixes = Trie()  # the user-defined tokens (their prefixes are walked)
        normal_scores = []
        keep = TokenAttr.NORMAL | TokenAttr.USER_DEFINED | TokenAttr.UNUSED
        for i, (text, attr) in enumerate(zip(vocab.tokens, vocab.attrs, strict=True)):
            key = text.encode("utf-8", "surrogateescape")
            if attr & TokenAttr.NORMAL:
                normal_scores.append(vocab.scores[i])
            if attr & keep:
                self.pieces.add(key, i)
            if attr & TokenAttr.USER_DEFINED:
                self.user_prefixes.add(key, i)
        self.unknown_score = (min(normal_scores) if normal_scores else 3.4e38) - _UNKNOWN_PENALTY

    def _normalize_prefix(self, data: bytes, pos: int) -> tuple[bytes, int]:
        # naive_trie::get_longest_prefix: how far the input follows the user-defined
        # tokens' trie, whether or not a whole token ends there
        n = self.user_prefixes.prefix_len(data, pos)
        if n:
            return data[pos : pos + n], n
        if self.charsmap is not None:
            n, repl = self.charsmap.longest(data, pos)
            if n:
                return repl, n
        n = _valid_char_len(data, pos)
        return (data[pos : pos + n], n) if n else (_REPLACEMENT, 1)

    def normalize(self, text: str) -> bytes:
        """llm_tokenizer_ugm_session::normalize (whitespace as a prefix, never suffix)."""
        v = self.vocab
        space = SPACE_ESCAPE.encode() if v.escape_whitespaces else b" "
        merge = v.remove_extra_whitespaces
        data = text.encode("utf-8", "surrogatepass")
        out = bytearray()
        prepended = in_word = False
        pos = 0
        while pos < len(data):
            piece, used = self._normalize_prefix(data, pos)
            for c in piece:
                if c != 0x20:
                    if not in_word:
                        in_word = True
                        if (v.add_space_prefix and not prepended) or merge:
                            out += space
                            prepended = True
                    out.append(c)
                else:
                    in_word = False
                    if not merge:
                        out += space
            pos += used
        return bytes(out)

    def encode(self, text: str) -> list[int]:
        data = self.normalize(text)
        n = len(data)
        if not n:
            return []
        unk = self.vocab.ids["unk"]
        user = TokenAttr.USER_DEFINED
        attrs, scores, pieces = self.vocab.attrs, self.vocab.scores, self.pieces
        # best[i] = (score, token, start) of the best tokenization of data[:i]
        best: list[tuple[float, int | None, int]] = [(-sys.float_info.max, unk, 0)] * (n + 1)
        best[0] = (0.0, unk, 0)
        pos = 0
        while pos < n:
            char_len = min(utf8_len(data[pos]), n - pos)
            base = best[pos][0]
            whole_char = False
            for end, tid in pieces.matches(data, pos):
                whole_char |= end - pos == char_len
                score = base + (0.0 if attrs[tid] & user else scores[tid])
                if score > best[end][0]:
                    best[end] = (score, tid, pos)
            if not whole_char:
                score = base + self.unknown_score
                if score > best[pos + char_len][0]:
                    best[pos + char_len] = (score, unk, pos)
            pos += char_len
        out: list[int] = []
        at, prev_unknown = n, False
        while True:
            _, tid, start = best[at]
            if not (prev_unknown and tid == unk):
                out.append(tid if tid is not None else -1)
            if start == 0:
                break
            prev_unknown = tid == unk
            at = start
        return out[::-1]
