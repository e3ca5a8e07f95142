"""SentencePiece BPE (tokenizer.ggml.model "llama"), as llm_tokenizer_spm_session.

The text (spaces already escaped to U+2581) is cut into UTF-8 characters; every
adjacent pair whose concatenation is a vocabulary entry is queued by that entry's
score, and the best pair (highest score, ties to the leftmost) is merged until none is
left. A symbol that is not a vocabulary entry becomes byte tokens <0xXX>.
"""

from __future__ import annotations

import heapq

from onnxexec.errors import GGUFError
from onnxexec.llm.vocab import Vocab


class SpmEncoder:
    """Escaped text fragment -> ids, for one SentencePiece vocabulary."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab

    def encode(self, text: str) -> list[int]:
        t2i = self.vocab.token_to_id
        scores = self.vocab.scores
        syms = list(text)
        n = len(syms)
        nxt = [*range(1, n), -1]
        prv = list(range(-1, n - 1))
        heap: list[tuple[float, int, int, int]] = []

        def push(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            tid = t2i.get(syms[left] + syms[right])
            if tid is not None:
                size = len(syms[left]) + len(syms[right])
                heapq.heappush(heap, (-scores[tid], left, right, size))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            a, b = syms[left], syms[right]
            if not a or not b or len(a) + len(b) != size:
                continue  # one side merged since this pair was queued
            syms[left], syms[right] = a + b, ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prv[nxt[right]] = left
            push(prv[left], left)
            push(left, nxt[left])
        out: list[int] = []
        i = 0 if n else -1
        while i != -1:
            sym = syms[i]
            tid = t2i.get(sym)
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self._byte_token(b) for b in sym.encode("utf-8", "surrogatepass"))
            i = nxt[i]
        return out

    def _byte_token(self, byte: int) -> int:
        """llama_vocab::byte_to_token for SPM: <0xXX>, else the raw one-byte text."""
        t2i = self.vocab.token_to_id
        tid = t2i.get(f"<0x{byte:02X}>")
        if tid is None:
            tid = t2i.get(bytes((byte,)).decode("utf-8", "surrogateescape"))
        if tid is None:
            raise GGUFError(f"SPM vocabulary has no token for byte 0x{byte:02X}")
        return tid
