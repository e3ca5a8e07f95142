"""Byte-level BPE (tokenizer.ggml.model "gpt2" / "gemma4"), as llm_tokenizer_bpe_session.

Each pre-token is cut into characters (after GPT-2 byte encoding, one per UTF-8 byte),
then adjacent pairs are merged lowest merge-rank first, ties to the leftmost pair, one
merge at a time (new pairs formed by a merge compete with the remaining ones). A final
symbol missing from the vocabulary falls back to one token per byte.
"""

from __future__ import annotations

import heapq

from onnxexec.llm.pretokenize import regex_split
from onnxexec.llm.vocab import Vocab

_CACHE_LIMIT = 1 << 16


def bpe_merge(word: str, ranks: dict[str, int]) -> list[str]:
    """The symbols `word` merges into; ranks maps "left right" to the merge's rank."""
    syms = list(word)
    n = len(syms)
    if n < 2:
        return syms
    nxt = [*range(1, n), -1]
    prv = list(range(-1, n - 1))
    heap: list[tuple[int, int, int, str]] = []

    def push(left: int, right: int) -> None:
        if left < 0 or right < 0:
            return
        rank = ranks.get(syms[left] + " " + syms[right])
        if rank is not None:
            heapq.heappush(heap, (rank, left, right, syms[left] + syms[right]))

    for i in range(n - 1):
        push(i, i + 1)
    while heap:
        _, left, right, text = heapq.heappop(heap)
        a, b = syms[left], syms[right]
        if not a or not b or a + b != text:
            continue  # outdated: one side has merged since
        syms[left], syms[right] = text, ""
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prv[nxt[right]] = left
        push(prv[left], left)
        push(left, nxt[left])
    return [s for s in syms if s]


class BpeEncoder:
    """Text fragment (no special tokens in it) -> ids, for one BPE vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.regexes = vocab.regexes
        self._cache: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        cache = self._cache
        for word in regex_split(text, self.regexes, self.vocab.byte_encode):
            ids = cache.get(word)
            if ids is None:
                ids = self._encode_word(word)
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[word] = ids
            out.extend(ids)
        return out

    def _encode_word(self, word: str) -> list[int]:
        v = self.vocab
        t2i = v.token_to_id
        if (
            word
            and word in t2i
            and (v.ignore_merges or (v.pre == "gemma4" and not word.strip("\n")))
        ):
            return [t2i[word]]  # a whole-word vocab entry (or gemma4's newline runs)
        out: list[int] = []
        for sym in bpe_merge(word, v.merges):
            tid = t2i.get(sym)
            if tid is not None:
                out.append(tid)
                continue
            for byte in sym.encode("utf-8", "surrogatepass"):
                if v.byte_encode:
                    key = bytes((byte,)).decode("utf-8", "surrogateescape")
                else:
                    key = f"<0x{byte:02X}>"
                tid = t2i.get(key)
                if tid is not None:  # llama.cpp silently drops a byte it cannot map
                    out.append(tid)
        return out
