"""Constrained decoding with llguidance: token masks from a JSON schema or Lark grammar.

llguidance (github.com/guidance-ai/llguidance) was measured against xgrammar and
outlines-core on SmolLM2's 49k vocabulary (benchmarks/bench_grammar.py): masks of
0.02 ms a token (p50; xgrammar 0.013 ms, outlines-core 0.6 ms after a 0.3 s schema
compile, 13 ms worst) against a ~70 ms decode step: either fast engine costs < 0.1%
of decode. llguidance was picked for compiling schemas lazily (no per-schema wait) and a
wheel without xgrammar's GPU dependencies (triton). The vocabulary is ours: each
token's bytes from Tokenizer.token_to_piece, control tokens marked special with a 0xFF
prefix exactly as llguidance's llama.cpp adapter (llguidance/llamacpp.py) does, and text
tokenized by our encoder.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from onnxexec.errors import OnnxExecError
from onnxexec.llm.token_attrs import TokenAttr

if TYPE_CHECKING:
    from onnxexec.llm.tokenizer import Tokenizer


class GrammarError(OnnxExecError, ValueError):
    """A response_format schema or tool grammar that llguidance refuses."""


class _Vocab:
    """The object llguidance.TokenizerWrapper reads: token bytes, eos, a tokenize call."""

    def __init__(self, tok: Tokenizer, eos: int) -> None:
        v = tok.vocab
        self.eos_token_id = eos
        self.bos_token_id = tok.bos_id
        self.tokens: list[bytes] = []
        self.special_token_ids: list[int] = []
        for i in range(tok.vocab_size):
            piece = tok.token_to_piece(i, special=True)
            attr = v.attrs[i]
            if attr & TokenAttr.CONTROL or (
                attr & TokenAttr.USER_DEFINED and piece.startswith(b"<") and piece.endswith(b">")
            ):
                piece = b"\xff" + piece
                self.special_token_ids.append(i)
            self.tokens.append(piece)
        self._tok = tok

    def __call__(self, text: bytes | str) -> list[int]:
        s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return self._tok.encode(s, add_special=False, parse_special=False)


class GrammarFactory:
    """One llguidance tokenizer for a model's vocabulary (built once, ~1 s for 49k tokens)."""

    def __init__(self, tok: Tokenizer, eos: int, eog: list[int] | None = None) -> None:
        import llguidance

        self._ll = llguidance
        self.n_vocab = tok.vocab_size
        self.eos = eos
        self.lltok = llguidance.LLTokenizer(
            llguidance.TokenizerWrapper(_Vocab(tok, eos)),
            n_vocab=tok.vocab_size,
            eos_token=eog or eos,  # any end-of-generation id may close a finished grammar
        )

    def json_schema(self, schema: dict[str, Any] | None) -> str:
        """The grammar text for a JSON schema (None: any JSON object, json_object mode)."""
        s: dict[str, Any] = {"type": "object"} if schema is None else schema
        try:
            return self._ll.LLMatcher.grammar_from_json_schema(
                json.dumps(s), defaults={"whitespace_flexible": False}
            )
        except (ValueError, TypeError) as e:
            raise GrammarError(f"response_format: invalid JSON schema: {e}") from None

    def lark(self, text: str) -> str:
        return self._ll.LLMatcher.grammar_from_lark(text)

    def matcher(self, grammar: str) -> Matcher:
        m = self._ll.LLMatcher(self.lltok, grammar, log_level=0)
        if m.is_error():
            raise GrammarError(f"grammar: {m.get_error()}")
        return Matcher(m, self.n_vocab)


class Matcher:
    """One request's grammar state: mask the logits, then advance by the sampled token."""

    def __init__(self, m: Any, n_vocab: int) -> None:
        self._m = m
        self.n_vocab = n_vocab
        self._words = np.zeros((n_vocab + 31) // 32, dtype=np.int32)

    def allowed(self) -> np.ndarray:
        """(V,) bool: the tokens the grammar allows next (EOS once the grammar is complete)."""
        self._m.unsafe_compute_mask_ptr(self._words.ctypes.data, self._words.nbytes)
        bits = np.unpackbits(self._words.view(np.uint8), bitorder="little")
        return bits[: self.n_vocab].astype(bool)

    def apply(self, logits: np.ndarray) -> None:
        """In place: logits of disallowed tokens -> -inf."""
        logits[~self.allowed()] = -np.inf

    def advance(self, token: int) -> None:
        if not self._m.is_stopped():
            self._m.consume_token(token)

    @property
    def error(self) -> str | None:
        return self._m.get_error() if self._m.is_error() else None

    @property
    def done(self) -> bool:
        return bool(self._m.is_stopped() or self._m.is_accepting())
