"""Tokenizer metadata found by the fuzzer (issue 20): costs that grew with the longest
token, and metadata errors that surfaced as raw exceptions during encode."""

from __future__ import annotations

import time

import pytest

from onnxexec.errors import GGUFError
from onnxexec.llm import load_tokenizer
from tests.fuzz.seeds import tokenizer_seeds

K = "tokenizer.ggml."


@pytest.mark.parametrize("family", [2, 3], ids=["wpm", "ugm"])
def test_one_very_long_token_does_not_make_encode_quadratic(family: int) -> None:
    md = dict(tokenizer_seeds()[family])
    short = load_tokenizer(md)
    text = "a" * 3000 + " hello the " + "b" * 2000
    want = short.encode(text)
    md[K + "tokens"] = [*md[K + "tokens"][:-1], "x" * 70000]  # the last token, made huge
    tok = load_tokenizer(md)
    t0 = time.perf_counter()
    got = tok.encode(text)
    # before: every position sliced every length up to 70000 (~45 s for 6k characters)
    assert time.perf_counter() - t0 < 5
    assert got == want  # the long token matches nothing in the text


def test_ugm_user_defined_token_of_70k_bytes_loads_without_its_prefixes() -> None:
    md = dict(tokenizer_seeds()[3])
    md[K + "tokens"] = [*md[K + "tokens"][:-1], "<" * 70000]  # user-defined (type 4)
    tok = load_tokenizer(md)  # a set of every prefix would be 2.4 GB
    assert tok.encode("<<<", add_special=False)  # the prefix walk still splits it out


def test_spm_byte_fallback_without_byte_tokens_is_a_gguf_error() -> None:
    md = dict(tokenizer_seeds()[1])
    keep = [i for i, t in enumerate(md[K + "tokens"]) if t != "<0xB4>"]
    for key in ("tokens", "scores", "token_type"):
        md[K + key] = [md[K + key][i] for i in keep]
    tok = load_tokenizer(md)
    with pytest.raises(GGUFError, match="no token for byte 0xB4"):
        tok.encode("\u00b4")  # UTF-8 C2 B4: no piece, so byte tokens; 0xB4 is missing


def test_add_bos_without_a_valid_bos_id_is_a_gguf_error() -> None:
    # chatglm-bpe drops the default BOS; the metadata's id is outside the vocabulary
    md = dict(tokenizer_seeds()[0], **{K + "bos_token_id": 10**6, K + "add_bos_token": True})
    md[K + "pre"] = "chatglm-bpe"
    tok = load_tokenizer(md)
    assert tok.bos_id is None and tok.add_bos
    with pytest.raises(GGUFError, match="no BOS token"):
        tok.encode("hi")
