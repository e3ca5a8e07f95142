"""Tokenizer metadata found by the fuzzer (issue 20): costs that grew with the longest
token, and metadata errors that surfaced as raw exceptions during encode."""

from __future__ import annotations

import time

import pytest

from onnxexec.errors import GGUFError
from onnxexec.llm import load_tokenizer
from onnxexec.llm.vocab import MAX_TOKEN_CHARS
from tests.fuzz.seeds import tokenizer_seeds

K = "tokenizer.ggml."


@pytest.mark.parametrize("family", [2, 3], ids=["wpm", "ugm"])
def test_a_long_token_does_not_make_encode_quadratic(family: int) -> None:
    md = dict(tokenizer_seeds()[family])
    short = load_tokenizer(md)
    text = "a" * 3000 + " hello the " + "b" * 2000
    want = short.encode(text)
    md[K + "tokens"] = [*md[K + "tokens"][:-1], "x" * MAX_TOKEN_CHARS]  # the last, made long
    tok = load_tokenizer(md)
    t0 = time.perf_counter()
    got = tok.encode(text)
    # before: every position sliced every length up to the longest token (a 70k token:
    # ~45 s for 6k characters); the trie walks only as far as a token continues
    assert time.perf_counter() - t0 < 5
    assert got == want  # the long token matches nothing in the text


def test_tokens_longer_than_the_limit_are_refused() -> None:
    # a 70k-character token and a 70k-character run of its letter: ~2.5e9 trie steps
    md = dict(tokenizer_seeds()[3])
    md[K + "tokens"] = [*md[K + "tokens"][:-1], "x" * 70000]
    with pytest.raises(
        GGUFError, match=f"token #33 is 70000 characters long \\(limit {MAX_TOKEN_CHARS}"
    ):
        load_tokenizer(md)


def test_ugm_user_defined_token_loads_without_its_prefixes() -> None:
    md = dict(tokenizer_seeds()[3])
    md[K + "tokens"] = [*md[K + "tokens"][:-1], "<" * MAX_TOKEN_CHARS]  # user-defined (type 4)
    tok = load_tokenizer(md)  # was a set of every prefix: 0.5 MB here, 2.4 GB for 70k
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
