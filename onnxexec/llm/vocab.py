"""A GGUF tokenizer vocabulary, read the way llama.cpp's llama_vocab::impl::load reads it.

Holds the token texts, scores and attributes, the special ids, the end-of-generation
set and the per-family options (add_bos, add_space_prefix, clean_spaces, ...), and
turns ids back into bytes (token_to_piece / detokenize). The encoders live in
tokenizer_{bpe,spm,wpm,ugm}.py; tokenizer.py ties them together.
"""

from __future__ import annotations

import enum
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onnxexec.errors import GGUFError
from onnxexec.llm.pretokenize_rules import PRE_TOKENIZERS, REGEXES
from onnxexec.llm.token_attrs import SPECIAL, TYPE_TO_ATTR, TokenAttr, model_attrs, special_attrs
from onnxexec.llm.unicode_props import UNICODE_TO_BYTE

KEY = "tokenizer.ggml."
SPACE_ESCAPE = "\u2581"  # SentencePiece's visible space


# metadata key suffix -> special id name; later keys override (deprecated fim aliases)
_ID_KEYS = (
    ("bos_token_id", "bos"),
    ("eos_token_id", "eos"),
    ("eot_token_id", "eot"),
    ("eom_token_id", "eom"),
    ("unknown_token_id", "unk"),
    ("seperator_token_id", "sep"),
    ("padding_token_id", "pad"),
    ("mask_token_id", "mask"),
    ("fim_pre_token_id", "fim_pre"),
    ("fim_suf_token_id", "fim_suf"),
    ("fim_mid_token_id", "fim_mid"),
    ("fim_pad_token_id", "fim_pad"),
    ("fim_rep_token_id", "fim_rep"),
    ("fim_sep_token_id", "fim_sep"),
    ("prefix_token_id", "fim_pre"),
    ("suffix_token_id", "fim_suf"),
    ("middle_token_id", "fim_mid"),
)


class VocabType(enum.Enum):
    SPM = "spm"  # tokenizer.ggml.model "llama"
    BPE = "bpe"  # "gpt2", "gemma4"
    WPM = "wpm"  # "bert"
    UGM = "ugm"  # "t5"


@dataclass
class Vocab:
    """Everything llama.cpp keeps about a tokenizer, minus the algorithm state."""

    type: VocabType
    pre: str  # key into pretokenize_rules.REGEXES ("" for non-BPE)
    tokens: list[str]
    scores: list[float]
    attrs: list[int]
    token_to_id: dict[str, int]
    merges: dict[str, int]  # "left right" -> rank
    ids: dict[str, int | None]  # bos, eos, eot, eom, unk, sep, pad, mask, fim_*
    add_bos: bool = False
    add_eos: bool = False
    add_sep: bool = False
    add_space_prefix: bool = False
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    clean_spaces: bool = False
    ignore_merges: bool = False
    byte_encode: bool = True
    lowercase: bool = True  # WPM BertNormalizer
    strip_accents: bool = True
    charsmap: bytes = b""  # UGM precompiled_charsmap
    eog_ids: frozenset[int] = frozenset()
    special_tokens: list[int] = field(default_factory=list)  # longest text first
    _pieces: dict[int, bytes] = field(default_factory=dict, repr=False)

    @property
    def regexes(self) -> tuple[str, ...]:
        return REGEXES[self.pre]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    # -- ids -> bytes -------------------------------------------------------------------

    def token_to_piece(self, token: int, special: bool = True) -> bytes:
        """The bytes of one token (llama_vocab::impl::token_to_piece, lstrip = 0).

        special=False renders CONTROL and UNKNOWN tokens as b"".
        """
        try:
            token = operator.index(token)
        except TypeError:
            raise ValueError(f"token id {token!r:.40} is not an integer") from None
        if not 0 <= token < len(self.tokens):
            # a negative id would silently wrap to the end of the vocabulary
            raise ValueError(f"token id {token} is not in [0, {len(self.tokens)})")
        attr = self.attrs[token]
        if not special and attr & SPECIAL:
            return b""
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self._render(token, attr)
        return piece

    def _render(self, token: int, attr: int) -> bytes:
        text = self.tokens[token]
        if attr & (SPECIAL | TokenAttr.USER_DEFINED):
            return _to_bytes(text)
        if attr & TokenAttr.NORMAL:
            if self.type is VocabType.BPE and not self.escape_whitespaces:
                return _gpt2_decode(text)
            return _to_bytes(text.replace(SPACE_ESCAPE, " "))
        if attr & TokenAttr.BYTE:
            return bytes([int(text[3:5], 16)])
        return b""

    def detokenize(
        self, ids: Sequence[int], remove_special: bool = False, unparse_special: bool = True
    ) -> bytes:
        """llama_vocab::impl::detokenize: pieces joined, the first one's leading space
        dropped when add_space_prefix, then clean_spaces' three passes."""
        ids = list(ids)
        remove_space = self.add_space_prefix
        if remove_special and self.add_bos and ids and ids[0] == self.ids["bos"]:
            remove_space = False
            ids = ids[1:]
        if remove_special and self.add_eos and ids and ids[-1] == self.ids["eos"]:
            ids = ids[:-1]
        parts = []
        for i in ids:
            piece = self.token_to_piece(i, unparse_special)
            if remove_space and piece.startswith(b" "):
                piece = piece[1:]
            remove_space = False
            parts.append(piece)
        text = b"".join(parts)
        return _clean_spaces(text) if self.clean_spaces else text


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _gpt2_decode(text: str) -> bytes:
    """llama_decode_text: GPT-2 byte characters back to bytes."""
    out = bytearray()
    for ch in text:
        b = UNICODE_TO_BYTE.get(ch)
        if b is not None:
            out.append(b)
        else:
            utf8 = _to_bytes(ch)
            out += b"[UNK_BYTE_0x" + utf8.hex().encode() + _to_bytes(text) + b"]"
    return bytes(out)


def _clean_spaces(text: bytes) -> bytes:
    """detokenize's clean_spaces passes (clean_up_tokenization_spaces), byte for byte."""
    if not text:
        return text
    # pass 1: " ?", " !", " .", " ," lose the space
    out = bytearray(text[:1])
    for i in range(1, len(text)):
        if text[i - 1] == 0x20 and text[i] in b"?!.,":
            out.pop()
        out.append(text[i])
    # pass 2: a lone apostrophe " ' " loses both spaces
    t = bytearray(out)
    out = bytearray(t[:1])
    i = 1
    while i < len(t):
        x = t[i]
        if x == 0x27 and i + 1 < len(t) and t[i - 1] == 0x20 and t[i + 1] == 0x20:
            out.pop()
            i += 1
            t[i] = 0  # llama.cpp overwrites the skipped space with NUL
        out.append(x)
        i += 1
    # pass 3: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it)
    t = bytes(out)
    out = bytearray(t[:1])
    for i in range(1, len(t)):
        x = t[i]
        if t[i - 1] == 0x20 and x == 0x27 and i + 1 < len(t):
            x1 = t[i + 1]
            if x1 in b"sm" or (
                x1 not in b"td" and i + 2 < len(t) and bytes((x1, t[i + 2])) in (b"re", b"ve")
            ):
                out.pop()
        out.append(x)
    return bytes(out)


# -- loading -------------------------------------------------------------------------


def _int_or_none(v: Any) -> int | None:
    return None if v is None else int(v)


MAX_TOKEN_CHARS = 1024
_BYTE_TEXT = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# key suffix -> (element kind, must have one entry a token)
_LISTS = {
    "tokens": (str, True),
    "scores": (float, True),
    "token_type": (int, True),
    "merges": (str, False),
    "precompiled_charsmap": (int, False),
}


def _is(v: Any, kind: type) -> bool:
    if isinstance(v, bool):
        return kind is int
    return isinstance(v, int | float) if kind is float else isinstance(v, kind)


def check_metadata(md: Mapping[str, Any]) -> None:
    """GGUFError naming the key when tokenizer metadata is missing or of the wrong type
    (llama.cpp's loader rejects a mistyped key the same way)."""
    tokens = md.get(KEY + "tokens")
    if tokens is None:
        raise GGUFError(f"GGUF metadata is missing '{KEY}tokens' (the tokenizer's vocabulary)")
    for suffix, (kind, per_token) in _LISTS.items():
        v = md.get(KEY + suffix)
        if v is None:
            continue
        if not isinstance(v, list) or not all(_is(x, kind) for x in v):
            raise GGUFError(f"GGUF metadata '{KEY}{suffix}' must be an array of {kind.__name__}")
        if per_token and len(v) != len(tokens):
            raise GGUFError(
                f"GGUF metadata '{KEY}{suffix}' has {len(v)} entries for {len(tokens)} tokens"
            )
    if not tokens:
        raise GGUFError(f"GGUF metadata '{KEY}tokens' is empty")
    # Matching costs up to (text length x longest token) for WPM and UGM, as in
    # llama.cpp; real vocabularies stay far below this (their longest: ~256).
    longest = max(range(len(tokens)), key=lambda i: len(tokens[i]))
    if len(tokens[longest]) > MAX_TOKEN_CHARS:
        raise GGUFError(
            f"GGUF tokenizer: token #{longest} is {len(tokens[longest])} characters long "
            f"(limit {MAX_TOKEN_CHARS})"
        )
    for key in ("model", "pre"):
        if KEY + key in md and not isinstance(md[KEY + key], str):
            raise GGUFError(f"GGUF metadata '{KEY}{key}' must be a string")
    for suffix, _ in _ID_KEYS:
        v = md.get(KEY + suffix)
        if v is not None and not _is(v, int):
            raise GGUFError(f"GGUF metadata '{KEY}{suffix}' must be an integer, got {v!r:.80}")
    for i, t in enumerate(md.get(KEY + "token_type") or ()):
        if TYPE_TO_ATTR.get(t) == TokenAttr.BYTE and not _BYTE_TEXT.fullmatch(tokens[i]):
            raise GGUFError(
                f"GGUF tokenizer: byte token #{i} is {tokens[i]!r:.40}, not of the form <0xNN>"
            )


def load_vocab(md: Mapping[str, Any]) -> Vocab:
    """Build a Vocab from GGUF metadata (a dict of decoded key/values)."""
    check_metadata(md)
    model = md.get(KEY + "model")
    pre_name = str(md.get(KEY + "pre", "") or "")
    tokens = [t if t else f"[EMPTY_{i}]" for i, t in enumerate(md[KEY + "tokens"])]
    n = len(tokens)
    opts: frozenset[str] = frozenset()
    pre = ""
    ids: dict[str, int | None] = dict.fromkeys(
        (
            "bos",
            "eos",
            "eot",
            "eom",
            "unk",
            "sep",
            "pad",
            "mask",
            "fim_pre",
            "fim_suf",
            "fim_mid",
            "fim_pad",
            "fim_rep",
            "fim_sep",
        )
    )
    v_kw: dict[str, Any] = {}
    merges: dict[str, int] = {}
    if model == "llama":
        vtype = VocabType.SPM
        ids.update(bos=1, eos=2, unk=0)
        v_kw.update(add_space_prefix=True, add_bos=True)
    elif model == "bert":
        vtype = VocabType.WPM
        ids.update(bos=101, unk=100, sep=102, pad=0, mask=103)
        v_kw.update(add_bos=True, add_sep=True, clean_spaces=True)
    elif model in ("gpt2", "gemma4"):
        vtype = VocabType.BPE
        if not isinstance(md.get(KEY + "merges"), list):
            raise GGUFError("GGUF tokenizer: BPE vocabulary without tokenizer.ggml.merges")
        lines = md[KEY + "merges"]
        # reversed so that, as in llama.cpp, the first of duplicate merges keeps its rank
        merges = dict(zip(reversed(lines), range(len(lines) - 1, -1, -1), strict=True))
        if model == "gpt2":
            ids.update(bos=11, eos=11)
        else:
            pre_name = "gemma4"
        if pre_name not in PRE_TOKENIZERS and pre_name:
            raise GGUFError(f"GGUF tokenizer: unknown pre-tokenizer type '{pre_name}'")
        pre, opts = PRE_TOKENIZERS[pre_name or "default"]
        if pre in ("kimi-k2", "whitespace"):
            raise GGUFError(f"GGUF tokenizer: pre-tokenizer '{pre_name}' not supported")
        v_kw.update(
            escape_whitespaces="escape_ws" in opts,
            clean_spaces="keep_spaces" not in opts,
            ignore_merges="ignore_merges" in opts,
            add_bos="add_bos" in opts,
            add_sep="add_sep" in opts,
            byte_encode=pre != "gemma4",
        )
        if "no_bos" in opts:
            ids["bos"] = None
    elif model == "t5":
        vtype = VocabType.UGM
        ids.update(eos=1, unk=2, pad=0)
        charsmap = md.get(KEY + "precompiled_charsmap") or []
        v_kw.update(add_eos=True, charsmap=bytes(b & 0xFF for b in charsmap))
    else:
        raise GGUFError(
            f"GGUF tokenizer model {model!r:.80} is not supported "
            "(supported: llama, gpt2, gemma4, bert, t5)"
        )
    for name, flag in (
        ("add_space_prefix", "add_space_prefix"),
        ("remove_extra_whitespaces", "remove_extra_whitespaces"),
    ):
        if KEY + name in md:
            v_kw[flag] = bool(md[KEY + name])

    scores = [float(s) for s in md.get(KEY + "scores") or []] or [0.0] * n
    types = md.get(KEY + "token_type")
    attrs = (
        [TYPE_TO_ATTR.get(int(t), TokenAttr.UNDEFINED) for t in types]
        if types
        else [TokenAttr.NORMAL] * n
    )
    token_to_id = dict(zip(tokens, range(n), strict=True))

    for name in list(ids):  # a default outside the vocabulary is dropped
        if ids[name] is not None and ids[name] >= n:
            ids[name] = None
    for suffix, name in _ID_KEYS:
        val = _int_or_none(md.get(KEY + suffix))
        if val is not None and 0 <= val < n:
            ids[name] = val
    for name, flag in (
        ("add_bos_token", "add_bos"),
        ("add_eos_token", "add_eos"),
        ("add_sep_token", "add_sep"),
    ):
        if KEY + name in md:
            v_kw[flag] = bool(md[KEY + name])
    if pre == "gemma4":
        v_kw["add_bos"] = True  # llama.cpp overrides it for Gemma 4
    v_kw["lowercase"] = bool(md.get(KEY + "normalizer.lowercase", True))
    v_kw["strip_accents"] = bool(md.get(KEY + "normalizer.strip_accents", v_kw["lowercase"]))

    eog = special_attrs(tokens, token_to_id, attrs, ids)
    model_attrs(md, pre_name, token_to_id, attrs)
    specials = sorted(
        (i for i in range(n) if attrs[i] & (SPECIAL | TokenAttr.USER_DEFINED)),
        key=lambda i: -len(_to_bytes(tokens[i])),
    )
    return Vocab(
        type=vtype,
        pre=pre,
        tokens=tokens,
        scores=scores,
        attrs=attrs,
        token_to_id=token_to_id,
        merges=merges,
        ids=ids,
        eog_ids=frozenset(eog),
        special_tokens=specials,
        **v_kw,
    )
