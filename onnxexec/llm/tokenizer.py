"""Tokenizers built from GGUF metadata, giving the same ids as llama.cpp.

    tok = load_tokenizer("model.gguf")          # or a metadata dict
    ids = tok.encode("Hello world")             # BOS/EOS as the model's metadata says
    text = tok.decode(ids)

encode() follows llama_vocab::impl::tokenize: special tokens are split out of the text
first (control tokens only when parse_special; user-defined tokens always), then every
remaining fragment goes through the vocabulary's algorithm (SPM, BPE, WPM or UGM).
llama.cpp's tokenizer tests (models/ggml-vocab-*.gguf.inp/.out) are the reference:
tests/parity/test_vocab.py runs all of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from onnxexec.errors import GGUFError
from onnxexec.llm.token_attrs import TokenAttr
from onnxexec.llm.tokenizer_bpe import BpeEncoder
from onnxexec.llm.tokenizer_spm import SpmEncoder
from onnxexec.llm.tokenizer_ugm import UgmEncoder
from onnxexec.llm.tokenizer_wpm import WpmEncoder
from onnxexec.llm.vocab import SPACE_ESCAPE, Vocab, VocabType, load_vocab

_C_SPACE = " \t\n\v\f\r"  # isspace() in the C locale, used by LSTRIP/RSTRIP


def read_tokenizer_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The GGUF file's metadata, via onnxexec's reader (or gguf-py's if unavailable)."""
    try:
        from onnxexec.loaders.gguf_reader import read_gguf
    except ImportError:
        return _read_with_gguf_py(path)
    return dict(read_gguf(path).metadata)


def _read_with_gguf_py(path: str | os.PathLike[str]) -> dict[str, Any]:
    import gguf

    reader = gguf.GGUFReader(str(path))
    out: dict[str, Any] = {}
    for key, f in reader.fields.items():
        if not key.startswith(("tokenizer.", "general.")):
            continue
        if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            if f.types[-1] == gguf.GGUFValueType.STRING:
                out[key] = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            else:
                out[key] = [f.parts[i].tolist()[0] for i in f.data]
        elif f.types and f.types[0] == gguf.GGUFValueType.STRING:
            out[key] = bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape")
        else:
            out[key] = f.parts[f.data[0]].tolist()[0]
    return out


class Tokenizer:
    """Text <-> token ids for one GGUF vocabulary (see module docstring)."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self._encoder: SpmEncoder | BpeEncoder | WpmEncoder | UgmEncoder
        if vocab.type is VocabType.SPM:
            self._encoder = SpmEncoder(vocab)
        elif vocab.type is VocabType.BPE:
            self._encoder = BpeEncoder(vocab)
        elif vocab.type is VocabType.UGM:
            self._encoder = UgmEncoder(vocab)
        else:
            self._encoder = WpmEncoder(vocab)

    # -- properties -----------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.vocab.n_tokens

    @property
    def bos_id(self) -> int | None:
        return self.vocab.ids["bos"]

    @property
    def eos_id(self) -> int | None:
        return self.vocab.ids["eos"]

    @property
    def eot_id(self) -> int | None:
        return self.vocab.ids["eot"]

    @property
    def eog_ids(self) -> frozenset[int]:
        """Every id that ends generation (eos, eot, eom, <|im_end|>, ... as llama.cpp)."""
        return self.vocab.eog_ids

    @property
    def add_bos(self) -> bool:
        return self.vocab.add_bos

    @property
    def add_eos(self) -> bool:
        return self.vocab.add_eos

    def is_eog(self, token: int) -> bool:
        return token in self.vocab.eog_ids

    def is_control(self, token: int) -> bool:
        return bool(self.vocab.attrs[token] & TokenAttr.CONTROL)

    def token_text(self, token: int) -> str:
        """The vocabulary entry as stored (e.g. "Ġhello", "▁hello", "<0x0A>")."""
        return self.vocab.tokens[token]

    def token_id(self, text: str) -> int | None:
        """The id of a vocabulary entry given its stored text, else None."""
        return self.vocab.token_to_id.get(text)

    # -- encode ---------------------------------------------------------------------

    def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids of `text` (llama_tokenize).

        add_special: add BOS/EOS (BERT: CLS/SEP) as the vocabulary's metadata says.
        parse_special: also turn control-token texts such as "<|im_end|>" into their ids.
        """
        v = self.vocab
        frags = self._partition(text, parse_special) if text else []
        out: list[int] = []
        if v.type is VocabType.WPM:
            if add_special:
                out.append(_need(v.ids["bos"], "BOS"))
            for frag in frags:
                out.extend([frag] if isinstance(frag, int) else self._encoder.encode(frag))
            if add_special:
                out.append(_need(v.ids["sep"], "SEP"))
            return out
        if add_special and v.add_bos:
            out.append(_need(v.ids["bos"], "BOS"))
        prev_special = True  # SPM: a space is prefixed after BOS / a special token
        for frag in frags:
            if isinstance(frag, int):
                out.append(frag)
                prev_special = True
                continue
            if v.type is VocabType.SPM:
                if v.add_space_prefix and prev_special:
                    frag = " " + frag
                frag = frag.replace(" ", SPACE_ESCAPE)
            elif v.type is VocabType.BPE and v.escape_whitespaces:
                frag = frag.replace(" ", SPACE_ESCAPE)
            out.extend(self._encoder.encode(frag))
            prev_special = False
        if add_special and v.add_eos:
            out.append(_need(v.ids["eos"], "EOS"))
        return out

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        """tokenizer_st_partition: special-token texts become ids, longest first.

        User-defined tokens are split out even without parse_special (as Hugging Face
        tokenizers do for added tokens); LSTRIP/RSTRIP eat C-locale whitespace."""
        v = self.vocab
        frags: list[str | int] = [text]
        for tid in v.special_tokens:
            attr = v.attrs[tid]
            if not parse_special and attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN):
                continue
            needle = v.tokens[tid]
            if not any(isinstance(f, str) and needle in f for f in frags):
                continue
            new: list[str | int] = []
            for frag in frags:
                if isinstance(frag, int) or needle not in frag:
                    new.append(frag)
                    continue
                rest = frag
                while True:
                    at = rest.find(needle)
                    if at < 0:
                        if rest:
                            new.append(rest)
                        break
                    left = rest[:at]
                    if attr & TokenAttr.LSTRIP:
                        left = left.rstrip(_C_SPACE)
                    if left:
                        new.append(left)
                    new.append(tid)
                    rest = rest[at + len(needle) :]
                    if attr & TokenAttr.RSTRIP:
                        rest = rest.lstrip(_C_SPACE)
            frags = new
        return frags

    # -- decode ---------------------------------------------------------------------

    def token_to_piece(self, token: int, special: bool = True) -> bytes:
        """The bytes one token stands for (control tokens as their text if special)."""
        return self.vocab.token_to_piece(token, special)

    def decode_bytes(self, ids: Iterable[int], skip_special: bool = False) -> bytes:
        """llama_detokenize(remove_special=False, unparse_special=not skip_special)."""
        return self.vocab.detokenize(
            list(ids), remove_special=False, unparse_special=not skip_special
        )

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text of `ids`; invalid UTF-8 (e.g. a cut multi-byte character) becomes U+FFFD."""
        return self.decode_bytes(ids, skip_special).decode("utf-8", "replace")

    def stream(self, skip_special: bool = False) -> StreamDecoder:
        return StreamDecoder(self, skip_special)


def _need(token: int | None, name: str) -> int:
    if token is None:  # the metadata asks for it (add_bos_token...) but names no valid id
        raise GGUFError(f"the vocabulary has no {name} token but the tokenizer needs one")
    return token


def _incomplete_tail(buf: bytes) -> int:
    """How many trailing bytes of `buf` start a UTF-8 sequence that is not finished."""
    for back in range(1, min(4, len(buf)) + 1):
        b = buf[-back]
        if b & 0xC0 == 0x80:  # continuation byte: look further back for the lead
            continue
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return back if need > back else 0
    return 0


class StreamDecoder:
    """Incremental detokenizer for generation: push(id) returns the new text.

    Pieces are concatenated as llama.cpp's per-token streaming does (no leading-space
    removal or clean-up of " ," style spaces); bytes of a multi-byte character split
    across tokens are held back until the character is complete.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip_special = skip_special
        self._pending = b""

    def push(self, token: int) -> str:
        buf = self._pending + self.tokenizer.token_to_piece(token, not self.skip_special)
        cut = len(buf) - _incomplete_tail(buf)
        self._pending = buf[cut:]
        return buf[:cut].decode("utf-8", "replace")

    def push_many(self, tokens: Iterable[int]) -> str:
        return "".join(self.push(t) for t in tokens)

    def flush(self) -> str:
        """Whatever is still held back (an unfinished character becomes U+FFFD)."""
        buf, self._pending = self._pending, b""
        return buf.decode("utf-8", "replace")


def load_tokenizer(path_or_metadata: str | os.PathLike[str] | Mapping[str, Any]) -> Tokenizer:
    """Tokenizer from a GGUF file path or from its metadata mapping."""
    if isinstance(path_or_metadata, (str, os.PathLike, Path)):
        md: Mapping[str, Any] = read_tokenizer_metadata(path_or_metadata)
    else:
        md = path_or_metadata
    return Tokenizer(load_vocab(md))


__all__ = ["StreamDecoder", "Tokenizer", "load_tokenizer", "read_tokenizer_metadata"]
