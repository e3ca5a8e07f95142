"""GGUF tokenizers on tiny hand-made vocabularies (llama.cpp semantics).

Expected ids are worked out by hand from the algorithms' definitions in llama.cpp's
src/llama-vocab.cpp; the pre-tokenizer is also checked against the `regex` module
running the original Hugging Face patterns where llama.cpp's splitters agree with them.
"""

from __future__ import annotations

from typing import Any

import pytest

from onnxexec.errors import GGUFError
from onnxexec.llm import StreamDecoder, load_tokenizer
from onnxexec.llm.pretokenize import _ecma_to_python, regex_split
from onnxexec.llm.pretokenize_rules import GPT2, LLAMA3, REGEXES
from onnxexec.llm.token_attrs import TokenAttr
from onnxexec.llm.tokenizer import _read_with_gguf_py, read_tokenizer_metadata
from onnxexec.llm.tokenizer_bpe import bpe_merge
from onnxexec.llm.vocab import _clean_spaces

K = "tokenizer.ggml."
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6


def bpe_md(
    tokens: list[str],
    merges: list[str],
    types: list[int] | None = None,
    pre: str = "gpt-2",
    **extra: Any,
) -> dict[str, Any]:
    md = {
        K + "model": "gpt2",
        K + "pre": pre,
        K + "tokens": tokens,
        K + "merges": merges,
        K + "token_type": types or [NORMAL] * len(tokens),
    }
    md.update({K + k: v for k, v in extra.items()})
    return md


def spm_md(pieces: list[tuple[str, float, int]], **extra: Any) -> dict[str, Any]:
    """<unk> <s> </s>, the 256 byte tokens, then `pieces` (text, score, type)."""
    toks = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
    toks += [(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
    toks += pieces
    md = {
        K + "model": "llama",
        K + "tokens": [t for t, _, _ in toks],
        K + "scores": [s for _, s, _ in toks],
        K + "token_type": [t for _, _, t in toks],
    }
    md.update({K + k: v for k, v in extra.items()})
    return md


SPM_BASE = 3 + 256  # first id of `pieces` in spm_md


# -- BPE -----------------------------------------------------------------------------


def test_bpe_merges_one_pair_at_a_time_by_rank():
    # "aa a" outranks "a a": after the first "a a" merge the new pair (aa, a) wins over
    # the remaining (a, a), so "aaaa" -> aaa + a (merging every "a a" first would give
    # aa + aa)
    assert bpe_merge("aaaa", {"aa a": 0, "a a": 1}) == ["aaa", "a"]
    tok = load_tokenizer(bpe_md(["a", "aa", "aaa"], ["aa a", "a a"]))
    assert tok.encode("aaaa", add_special=False) == [2, 0]


def test_bpe_equal_ranks_merge_leftmost_first():
    assert bpe_merge("aaa", {"a a": 0}) == ["aa", "a"]
    assert bpe_merge("abcd", {"c d": 0, "b c": 1, "a b": 2}) == ["ab", "cd"]


def test_bpe_byte_level_encoding_and_decoding():
    # GPT-2 byte map: space -> U+0120 (G with dot), newline -> U+010A
    tokens = ["h", "i", "\u0120", "\u0120h", "\u0120hi", "\u010a", "hi"]
    tok = load_tokenizer(bpe_md(tokens, ["\u0120 h", "\u0120h i", "h i"]))
    ids = tok.encode("hi hi\n", add_special=False)
    assert ids == [6, 4, 5]
    assert tok.token_to_piece(4) == b" hi"
    assert tok.decode(ids) == "hi hi\n"


def test_bpe_symbol_missing_from_vocab_falls_back_to_byte_tokens():
    # "é" is bytes C3 A9 -> byte-level symbols "Ã" (C3) and "©" (A9); "©" is not in the
    # vocabulary and its own UTF-8 bytes (C2 A9) are not tokens either, so llama.cpp
    # emits nothing for it
    tok = load_tokenizer(bpe_md(["\u00c3", "x"], []))
    assert tok.encode("\u00e9x", add_special=False) == [0, 1]


def test_bpe_add_bos_eos_from_metadata():
    md = bpe_md(
        ["a", "<s>", "</s>"],
        [],
        [NORMAL, CONTROL, CONTROL],
        bos_token_id=1,
        eos_token_id=2,
        add_bos_token=True,
        add_eos_token=True,
    )
    tok = load_tokenizer(md)
    assert tok.encode("a") == [1, 0, 2]
    assert tok.encode("a", add_special=False) == [0]
    assert (tok.bos_id, tok.eos_id) == (1, 2)


def test_llama3_pre_type_adds_bos_by_default_and_ignores_merges():
    md = bpe_md(
        ["a", "b", "ab", "<|begin_of_text|>"],
        [],
        [1, 1, 1, CONTROL],
        pre="llama-bpe",
        bos_token_id=3,
    )
    tok = load_tokenizer(md)
    # no merge "a b", but "ab" is a whole vocab entry (ignore_merges)
    assert tok.encode("ab") == [3, 2]


# -- special tokens -----------------------------------------------------------------


def test_control_tokens_split_only_with_parse_special_user_defined_always():
    tokens = ["<", "|", ">", "x", "<|im_end|>", "<tool>", "t", "o", "l"]
    types = [1, 1, 1, 1, CONTROL, USER_DEFINED, 1, 1, 1]
    tok = load_tokenizer(bpe_md(tokens, [], types, pre="qwen2"))
    plain = tok.encode("x<|im_end|>x", add_special=False)
    assert 4 not in plain and plain[0] == 3 and plain[-1] == 3
    assert tok.encode("x<|im_end|>x", add_special=False, parse_special=True) == [3, 4, 3]
    assert tok.encode("x<tool>x", add_special=False) == [3, 5, 3]


def test_eog_tokens_are_detected_by_text_and_made_control():
    tokens = ["a", "<|im_end|>", "<|endoftext|>"]
    tok = load_tokenizer(bpe_md(tokens, [], pre="qwen2", eos_token_id=2))
    assert tok.eot_id == 1
    assert tok.is_eog(1) and tok.is_eog(2) and not tok.is_eog(0)
    assert tok.vocab.attrs[1] & TokenAttr.CONTROL
    assert tok.decode([0, 1], skip_special=True) == "a"
    assert tok.decode([0, 1]) == "a<|im_end|>"


# -- SentencePiece --------------------------------------------------------------------


def test_spm_highest_score_pair_merges_first():
    pieces = [
        ("\u2581", -4.0, 1),
        ("a", -5.0, 1),
        ("b", -6.0, 1),
        ("\u2581a", -1.0, 1),
        ("ab", -2.0, 1),
    ]
    tok = load_tokenizer(spm_md(pieces))
    u, _, b, ua, ab = range(SPM_BASE, SPM_BASE + 5)
    assert tok.encode("ab", add_special=False) == [ua, b]  # "▁a" (-1) beats "ab" (-2)
    swapped = [(t, {-1.0: -2.0, -2.0: -1.0}.get(s, s), ty) for t, s, ty in pieces]
    assert load_tokenizer(spm_md(swapped)).encode("ab", add_special=False) == [u, ab]
    assert tok.encode("ab") == [1, ua, b]  # BOS by default for "llama" vocabularies


def test_spm_byte_fallback_and_decode():
    tok = load_tokenizer(spm_md([("\u2581", -1.0, 1), ("a", -2.0, 1)]))
    u, a = SPM_BASE, SPM_BASE + 1
    ids = tok.encode("a\u00e9", add_special=False)
    assert ids == [u, a, 3 + 0xC3, 3 + 0xA9]  # é = C3 A9 -> <0xC3> <0xA9>
    assert tok.token_to_piece(3 + 0x41) == b"A"
    assert tok.decode(ids) == "a\u00e9"  # the prefix space of the first token is dropped
    assert tok.decode([1, *ids]) == "<s> a\u00e9"  # ...but kept after BOS, as llama.cpp
    assert tok.decode([1, *ids], skip_special=True) == " a\u00e9"


def test_spm_space_prefix_after_special_token():
    pieces = [("\u2581", -1.0, 1), ("a", -2.0, 1), ("<x>", 0.0, USER_DEFINED)]
    tok = load_tokenizer(spm_md(pieces, add_eos_token=True))
    u, a, x = range(SPM_BASE, SPM_BASE + 3)
    assert tok.encode("a<x>a") == [1, u, a, x, u, a, 2]


# -- WordPiece --------------------------------------------------------------------------


def test_wpm_normalizes_splits_punctuation_and_uses_unk():
    tokens = [
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "\u2581hello",
        "\u2581world",
        "\u2581un",
        "aff",
        "able",
        "\u2581!",
        "\u2581cafe",
    ]
    md = {
        K + "model": "bert",
        K + "tokens": tokens,
        K + "token_type": [1] * 10,
        K + "unknown_token_id": 0,
        K + "bos_token_id": 1,
        K + "seperator_token_id": 2,
    }
    tok = load_tokenizer(md)
    assert tok.encode("Hello, World! unaffable Caf\u00e9") == [1, 3, 0, 4, 8, 5, 6, 7, 9, 2]


# -- unigram (T5) -----------------------------------------------------------------------


def _ugm(pieces: list[tuple[str, float]]) -> dict[str, Any]:
    toks = [("<pad>", 0.0, CONTROL), ("</s>", 0.0, CONTROL), ("<unk>", 0.0, UNKNOWN)]
    toks += [(t, s, NORMAL) for t, s in pieces]
    return {
        K + "model": "t5",
        K + "tokens": [t for t, _, _ in toks],
        K + "scores": [s for _, s, _ in toks],
        K + "token_type": [t for _, _, t in toks],
        K + "add_space_prefix": True,
        K + "remove_extra_whitespaces": True,
    }


def test_ugm_viterbi_picks_the_best_score_sum():
    pieces = [("\u2581", -2.0), ("\u2581ab", -3.0), ("\u2581a", -1.0), ("b", -1.0), ("c", -5.0)]
    # "▁ab" -> ▁a + b (-2) beats ▁ab (-3); with ▁ab at -1.5 the single piece wins
    assert load_tokenizer(_ugm(pieces)).encode("ab", add_special=False) == [5, 6]
    pieces[1] = ("\u2581ab", -1.5)
    assert load_tokenizer(_ugm(pieces)).encode("ab") == [4, 1]  # EOS added for t5


def test_ugm_merges_unknown_runs_and_extra_spaces():
    tok = load_tokenizer(_ugm([("\u2581", -2.0), ("c", -5.0)]))
    # "  xz   c " -> "▁xz▁c": x and z are one unknown run
    assert tok.encode("  xz   c ", add_special=False) == [3, 2, 3, 4]


# -- pre-tokenizers ---------------------------------------------------------------------

ORIGINAL_GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ORIGINAL_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TEXTS = [
    "Hello world's  test",
    "I'VE 12345 apples!!  \n\n  x",
    "  a\tb\r\nc  ",
    "don't stop-me now...",
    "caf\u00e9 na\u00efve 3.14 \u00bd",
    "x=[1,2]; y='q'",
]


@pytest.mark.parametrize("text", TEXTS)
def test_custom_splitters_match_the_regexes_they_implement(text: str):
    regex = pytest.importorskip("regex")
    assert regex_split(text, [GPT2], False) == regex.findall(ORIGINAL_GPT2, text)
    assert regex_split(text, [LLAMA3], False) == regex.findall(ORIGINAL_LLAMA3, text)


def test_collapsed_category_regex_and_byte_level_output():
    # starcoder: \p{N} (std::regex on category-collapsed text, so the Arabic-Indic
    # digit counts) isolates each digit, then the GPT-2 splitter
    assert regex_split("ab12\u0663 c", REGEXES["starcoder"], False) == [
        "ab",
        "1",
        "2",
        "\u0663",
        " c",
    ]
    assert regex_split("a b", REGEXES["gpt2"], True) == ["a", "\u0120b"]


def test_ecmascript_dollar_is_end_of_input():
    assert _ecma_to_python(r"\s+$|[$]\$") == r"\s+\Z|[$]\$"


# -- decoding ---------------------------------------------------------------------------


def test_clean_spaces_passes():
    assert _clean_spaces(b"Hello , world . I 'm here ' ok it 's") == (
        b"Hello, world. I'm here'ok it's"
    )
    assert _clean_spaces(b"don 't we 'll") == b"don 't we 'll"  # " 't", " 'll" stay
    assert _clean_spaces(b"they 're") == b"they're"


def test_stream_decoder_holds_back_split_utf8():
    tok = load_tokenizer(spm_md([("a", -1.0, 1)]))
    s = StreamDecoder(tok)
    assert s.push(SPM_BASE) == "a"
    assert s.push(3 + 0xC3) == ""
    assert s.push(3 + 0xA9) == "\u00e9"
    emoji = "\U0001f999".encode()  # 4 bytes
    assert [s.push(3 + b) for b in emoji] == ["", "", "", "\U0001f999"]
    assert s.push(3 + 0xE2) == ""
    assert s.flush() == "\ufffd"  # unfinished character at the end
    assert s.flush() == ""


def test_load_from_gguf_file(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(["h", "i", "hi", "<|endoftext|>"])
    w.add_token_types([1, 1, 1, CONTROL])
    w.add_token_merges(["h i"])
    w.add_eos_token_id(3)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tok = load_tokenizer(path)
    assert tok.encode("hi") == [2]
    assert tok.eos_id == 3 and tok.is_eog(3) and tok.vocab_size == 4
    # the gguf-py fallback reader gives the same tokenizer metadata
    ours = read_tokenizer_metadata(path)
    theirs = _read_with_gguf_py(path)
    assert {k: v for k, v in ours.items() if k.startswith("tokenizer.")} == {
        k: v for k, v in theirs.items() if k.startswith("tokenizer.")
    }


def test_unsupported_models_are_rejected_clearly():
    with pytest.raises(GGUFError, match="rwkv"):
        load_tokenizer({K + "model": "rwkv", K + "tokens": ["a"]})
    with pytest.raises(ValueError, match="pre-tokenizer"):
        load_tokenizer(bpe_md(["a"], [], pre="no-such-pre"))
