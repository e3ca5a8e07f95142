"""Token attributes and the special tokens llama.cpp recognises by their text.

llama_vocab::impl::load starts from tokenizer.ggml.token_type, then detects eot/eom/fim
ids by token text when the metadata does not name them, marks end-of-generation
tokens as CONTROL, and applies a few per-model LSTRIP/RSTRIP tweaks. All of that is
here, as data plus two functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class TokenAttr:
    """llama_token_attr bits (include/llama.h). Plain ints: they are tested for every
    token while loading, where enum.IntFlag arithmetic is ten times slower."""

    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5
    NORMALIZED = 1 << 6
    LSTRIP = 1 << 7
    RSTRIP = 1 << 8
    SINGLE_WORD = 1 << 9


# tokenizer.ggml.token_type values (llama_token_type) -> attribute
TYPE_TO_ATTR = {
    1: TokenAttr.NORMAL,
    2: TokenAttr.UNKNOWN,
    3: TokenAttr.CONTROL,
    4: TokenAttr.USER_DEFINED,
    5: TokenAttr.UNUSED,
    6: TokenAttr.BYTE,
}
SPECIAL = TokenAttr.CONTROL | TokenAttr.UNKNOWN

# Token texts llama.cpp recognises when the metadata does not name the id (none holds
# whitespace, hence the split strings). Its loop runs over an unordered_map, so with
# several candidates present its pick is arbitrary; here the first listed wins.
_DS_END = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # DeepSeek: fullwidth bars, U+2581
_EOT_TEXTS = "<|eot_id|> <|im_end|> <|end|> <end_of_turn> <|endoftext|> <|end_of_text|> <EOT>"
_AUTODETECT = {
    "eot": [*_EOT_TEXTS.split(), "_<EOT>", "[EOT]", _DS_END, "<end_of_utterance>"],
    "eom": ["<|eom_id|>"],
    "fim_pre": "<|fim_prefix|> <fim-prefix> <fim_prefix> <\uff5cfim\u2581begin\uff5c> <PRE> "
    "\u2581<PRE> <|code_prefix|> <|prefix|>".split(),
    "fim_suf": "<|fim_suffix|> <fim-suffix> <fim_suffix> <\uff5cfim\u2581hole\uff5c> <SUF> "
    "\u2581<SUF> <|code_suffix|> <|suffix|>".split(),
    "fim_mid": "<|fim_middle|> <fim-middle> <fim_middle> <\uff5cfim\u2581end\uff5c> <MID> "
    "\u2581<MID> <|code_middle|> <|middle|>".split(),
    "fim_pad": "<|fim_pad|> <fim-pad> <fim_pad> <PAD> [PAD]".split(),
    "fim_rep": "<|fim_repo|> <|repo_name|> <fim-repo> <REPO> <reponame>".split(),
    "fim_sep": ["<|file_sep|>"],
}
_EOG_TEXTS = frozenset(
    [
        *"<|eot_id|> <|im_end|> <|end|> <|return|> <|call|> <|flush|> <|calls|> <end_of_turn> "
        "<|endoftext|> </s> <|eom_id|> <EOT> _<EOT> [EOT] [EOS] <|end_of_text|> "
        "<end_of_utterance> <eos> <turn|> <|tool_response> [e~[".split(),
        _DS_END,
    ]
)
_ALWAYS_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")  # gpt-oss


def special_attrs(
    tokens: list[str], token_to_id: dict[str, int], attrs: list[int], ids: dict[str, int | None]
) -> set[int]:
    """Auto-detected eot/eom/fim ids, the UNUSED/CONTROL fix-ups and the EOG set."""
    for name, texts in _AUTODETECT.items():
        if ids[name] is not None:
            continue
        for t in texts:
            if t in token_to_id:
                ids[name] = i = token_to_id[t]
                attrs[i] |= TokenAttr.CONTROL
                break
    for i, a in enumerate(attrs):
        if a & TokenAttr.CONTROL and "unused" in tokens[i]:
            attrs[i] = a | TokenAttr.UNUSED
    eog = {ids[k] for k in ("fim_pad", "fim_rep", "fim_sep") if ids[k] is not None}
    for t in _EOG_TEXTS:
        if t in token_to_id:
            i = token_to_id[t]
            eog.add(i)
            attrs[i] |= TokenAttr.CONTROL
    for t in _ALWAYS_RENDERED:
        if t in token_to_id:
            attrs[token_to_id[t]] = TokenAttr.USER_DEFINED
    eog |= {ids[k] for k in ("eos", "eot", "eom") if ids[k] is not None}
    texts = {tokens[i]: i for i in eog}
    # o200k_harmony / solar-open: "<|end|>" ends a message, not the generation
    if "<|end|>" in texts and (
        ("<|return|>" in texts and "<|call|>" in texts)
        or ("<|calls|>" in texts and "<|flush|>" in texts)
    ):
        eog.discard(texts["<|end|>"])
        attrs[texts["<|end|>"]] = TokenAttr.USER_DEFINED
    # gemma4 / plamo: "</s>" is an ordinary token there
    if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
        eog.discard(texts["</s>"])
        attrs[texts["</s>"]] = TokenAttr.NORMAL
    return eog


def model_attrs(
    md: Mapping[str, Any], pre_name: str, token_to_id: dict[str, int], attrs: list[int]
) -> None:
    """Per-model LSTRIP/RSTRIP tweaks at the end of llama_vocab::impl::load."""
    name = str(md.get("general.name", "")).lower()
    arch = str(md.get("general.architecture", ""))

    def set_attr(text: str, attr: int, value: bool) -> None:
        i = token_to_id.get(text)
        if i is None:  # llama.cpp's .at() throws here; without the token there is nothing to set
            return
        attrs[i] = attrs[i] | attr if value else attrs[i] & ~attr

    if any(s in pre_name for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or any(
        s in arch for s in ("nomic-bert-moe", "jina-bert-v3")
    ):
        if "<mask>" in token_to_id:
            set_attr("<mask>", TokenAttr.LSTRIP, True)
    elif "phi-3" in name or "phi3" in name:
        for i, a in enumerate(attrs):
            if a & (SPECIAL | TokenAttr.USER_DEFINED):
                attrs[i] = a | TokenAttr.RSTRIP
        set_attr("</s>", TokenAttr.RSTRIP, True)
        for t in ("<unk>", "<s>", "<|endoftext|>"):
            set_attr(t, TokenAttr.RSTRIP, False)
    elif "modern-bert" in name and "[MASK]" in token_to_id:
        set_attr("[MASK]", TokenAttr.LSTRIP, True)
