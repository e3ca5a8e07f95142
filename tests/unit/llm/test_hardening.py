"""Malformed GGUF LLMs and bad arguments (issue 20): each one a clean GGUFError or
ValueError naming the key, tensor, type, arch or limit, never garbage or a hang.

The files are the tiny llama of _tiny.py edited record by record (tests/fuzz/gguf_codec);
nothing here runs a forward pass, so the tests are fast.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from onnxexec.errors import GGUFError
from onnxexec.llm import load_tokenizer
from onnxexec.llm.model import LLM, CacheState, _check_n_ctx
from onnxexec.llm.sampler import SamplingParams
from onnxexec.loaders.gguf_reader import read_gguf
from tests.fuzz.gguf_codec import GGUF, decode, encode
from tests.unit.llm._tiny import HEAD_DIM, N_EMBD, N_FF, N_HEAD_KV, vocab, write_tiny_gguf

U32, I32, F32, STR, ARR = 4, 5, 6, 8, 9


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    p = write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    return p.read_bytes()


def _edited(tmp_path: Path, tiny: bytes, edit: Callable[[GGUF], None]) -> Path:
    g = decode(tiny)
    edit(g)
    p = tmp_path / "edited.gguf"
    p.write_bytes(encode(g))
    return p


def test_the_unedited_file_loads(tiny: bytes, tmp_path: Path) -> None:
    llm = LLM(_edited(tmp_path, tiny, lambda g: None), n_ctx=8)
    assert llm.config.n_layer == 2 and llm.config.n_vocab == len(vocab()[0])


def test_huge_block_count_fails_at_once(tiny: bytes, tmp_path: Path) -> None:
    # used to hang in weight preparation, looping 2^31-1 layers
    p = _edited(tmp_path, tiny, lambda g: g.set("llama.block_count", U32, 2**31 - 1))
    t0 = time.perf_counter()
    with pytest.raises(GGUFError, match=r"llama\.block_count' = 2147483647 is outside"):
        LLM(p, n_ctx=8)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize(
    ("n", "match"),
    [
        (3, "block_count is 3 but the file has tensors for 2"),
        (1, "tensor for layer 1 but llama.block_count is 1"),
    ],
)
def test_block_count_must_match_the_layers_present(
    tiny: bytes, tmp_path: Path, n: int, match: str
) -> None:
    with pytest.raises(GGUFError, match=match):
        LLM(_edited(tmp_path, tiny, lambda g: g.set("llama.block_count", U32, n)), n_ctx=8)


kvd = N_HEAD_KV * HEAD_DIM


@pytest.mark.parametrize(
    ("name", "ne", "want"),
    [
        ("blk.0.attn_k.weight", [N_EMBD, kvd // 2], [kvd, N_EMBD]),  # halved rows
        ("blk.1.attn_v.weight", [N_EMBD // 2, kvd], [kvd, N_EMBD]),  # halved row length
        ("blk.0.ffn_up.weight", [0, N_FF], [N_FF, N_EMBD]),  # zero-length rows
        ("blk.1.attn_norm.weight", [N_EMBD // 2], [N_EMBD]),  # short vector
        ("blk.0.ffn_down.weight", [N_FF, N_EMBD, 1], [N_EMBD, N_FF]),  # extra dim
    ],
)
def test_tensor_shapes_must_match_the_architecture(
    tiny: bytes, tmp_path: Path, name: str, ne: list[int], want: list[int]
) -> None:
    # the data stay where they were: smaller tensors fit in the file and used to load
    def edit(g: GGUF) -> None:
        g.tensor(name).ne = ne

    with pytest.raises(GGUFError, match=rf"'{name}' has shape .* needs \[{want[0]}[,\]]"):
        LLM(_edited(tmp_path, tiny, edit), n_ctx=8)


def test_missing_tensor_is_named(tiny: bytes, tmp_path: Path) -> None:
    def edit(g: GGUF) -> None:
        g.tensors = [t for t in g.tensors if t.name != "blk.1.ffn_gate.weight"]

    with pytest.raises(GGUFError, match=r"no tensor 'blk\.1\.ffn_gate\.weight' \(llama needs it\)"):
        LLM(_edited(tmp_path, tiny, edit), n_ctx=8)


def test_ggml_type_without_a_kernel_is_named(tiny: bytes, tmp_path: Path) -> None:
    def edit(g: GGUF) -> None:
        g.tensor("blk.0.attn_q.weight").ggml_type = 26  # I32: same bytes as F32, no kernel

    with pytest.raises(GGUFError, match=r"'blk\.0\.attn_q\.weight' has ggml type I32"):
        LLM(_edited(tmp_path, tiny, edit), n_ctx=8)


def test_unknown_architecture_is_named(tiny: bytes, tmp_path: Path) -> None:
    p = _edited(tmp_path, tiny, lambda g: g.set("general.architecture", STR, "falcon"))
    with pytest.raises(GGUFError, match="unsupported architecture 'falcon'"):
        LLM(p, n_ctx=8)


def test_missing_tokenizer_tokens_is_named(tiny: bytes, tmp_path: Path) -> None:
    # used to be KeyError: 'tokenizer.ggml.tokens'
    p = _edited(tmp_path, tiny, lambda g: g.drop("tokenizer.ggml.tokens"))
    with pytest.raises(GGUFError, match=r"missing 'tokenizer\.ggml\.tokens'"):
        LLM(p, n_ctx=8)
    with pytest.raises(GGUFError, match=r"missing 'tokenizer\.ggml\.tokens'"):
        load_tokenizer(p)


def test_vocabulary_size_must_match_the_embedding_rows(tiny: bytes, tmp_path: Path) -> None:
    def edit(g: GGUF) -> None:
        for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"):
            etype, items = g.kv(key).value
            g.kv(key).value = (etype, items[:-1])

    n = len(vocab()[0])
    with pytest.raises(GGUFError, match=f"{n - 1} tokens but token_embd.weight has {n} rows"):
        LLM(_edited(tmp_path, tiny, edit), n_ctx=8)


@pytest.mark.parametrize(
    ("key", "vtype", "value", "match"),
    [
        ("llama.attention.layer_norm_rms_epsilon", F32, math.nan, "must be finite and > 0"),
        ("llama.attention.layer_norm_rms_epsilon", F32, -1e-5, "must be finite and > 0"),
        ("llama.attention.layer_norm_rms_epsilon", F32, 2.0, "is not below 1"),
        ("llama.rope.freq_base", F32, math.inf, "must be finite and > 0"),
        ("llama.rope.freq_base", F32, 0.0, "must be finite and > 0"),
        ("llama.context_length", U32, 0, r"context_length' = 0 is outside"),
        ("llama.context_length", U32, 2**32 - 1, r"context_length' = 4294967295 is outside"),
        ("llama.attention.head_count_kv", U32, 0, "head_count_kv' = 0 is outside"),
        ("llama.attention.head_count_kv", U32, 3, "not a multiple of head_count_kv 3"),
        ("llama.embedding_length", I32, -64, "embedding_length' = -64 is outside"),
        ("llama.feed_forward_length", STR, "96", "must be an integer, got '96'"),
        ("llama.rope.dimension_count", U32, 15, "dimension_count 15 != head size 16"),
    ],
)
def test_hyperparameters_are_checked(
    tiny: bytes, tmp_path: Path, key: str, vtype: int, value: object, match: str
) -> None:
    with pytest.raises(GGUFError, match=match):
        LLM(_edited(tmp_path, tiny, lambda g: g.set(key, vtype, value)), n_ctx=8)


@pytest.fixture(scope="module")
def llm(tiny: bytes, tmp_path_factory: pytest.TempPathFactory) -> LLM:
    p = tmp_path_factory.mktemp("ok") / "tiny.gguf"
    p.write_bytes(tiny)
    return LLM(p, n_ctx=16)


def test_n_ctx_beyond_the_model_limit(llm: LLM) -> None:
    with pytest.raises(ValueError, match=r"<= 256 \(the model's context_length\), got 257"):
        LLM(llm.path, n_ctx=257)
    with pytest.raises(ValueError, match="must be an integer"):
        LLM(llm.path, n_ctx=8.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_batch must be a positive integer"):
        LLM(llm.path, n_ctx=8, n_batch=0)


def test_n_ctx_beyond_memory(llm: LLM) -> None:
    big = dataclasses.replace(llm.config, n_layer=4096, n_head_kv=64, n_ctx_train=1 << 24)
    # 2 x 4096 layers x 2^24 positions x 64 x 16 x 4 bytes = 512 TiB
    with pytest.raises(ValueError, match=r"needs 524288\.0 GiB, more than this machine's"):
        _check_n_ctx(1 << 24, big)


@pytest.mark.parametrize("bad", [-1, 269, 10**12, 1.5, "3", True])
def test_eval_rejects_token_ids_out_of_range(llm: LLM, bad: object) -> None:
    # -1 used to wrap around to the last embedding row
    with pytest.raises(ValueError, match=r"token #1 is .*not an id in \[0, 269\)"):
        llm.eval([1, bad])  # type: ignore[list-item]
    assert llm.n_past == 0


@pytest.mark.parametrize("bad", [-1, -269, 269])
def test_decode_rejects_token_ids_out_of_range(llm: LLM, bad: int) -> None:
    tok = llm.tokenizer
    ids = [3 + 0x5D, 3 + 0x5E]  # 3 specials, then GPT-2's byte characters in byte order
    assert tok.decode(ids) == "]^"
    with pytest.raises(ValueError, match=rf"token id {bad} is not in \[0, 269\)"):
        tok.decode([*ids, bad])
    with pytest.raises(ValueError, match=r"token id -1 is not in \[0, 269\)"):
        tok.stream().push(-1)


@pytest.mark.parametrize(
    "kw",
    [
        {"temperature": math.nan},
        {"temperature": -0.5},
        {"top_p": math.nan},
        {"min_p": math.inf},
        {"repeat_penalty": math.nan},
        {"presence_penalty": math.nan},
        {"frequency_penalty": -math.inf},
        {"top_k": -1},
        {"top_k": 2.5},
        {"penalty_last_n": -2},
        {"logit_bias": {-1: 1.0}},
        {"logit_bias": {3: math.nan}},
        {"seed": -1},
    ],
)
def test_sampling_params_are_checked(kw: dict) -> None:
    with pytest.raises(ValueError, match=f"{next(iter(kw)).split('_')[0]}"):
        SamplingParams(**kw)


def test_logit_bias_beyond_the_logits() -> None:
    from onnxexec.llm.sampler import Sampler

    s = Sampler(SamplingParams(temperature=0, logit_bias={10: 1.0}))
    with pytest.raises(ValueError, match="token id 10 is not below the 4 logits"):
        s(np.zeros(4, np.float32))


def test_load_state_rejects_data_that_does_not_fit(llm: LLM) -> None:
    n_layer = llm.config.n_layer
    row = np.zeros((2, N_HEAD_KV, HEAD_DIM), np.float32)
    good = CacheState([1, 2], [row] * n_layer, [row] * n_layer)
    llm.load_state(good)
    assert llm.tokens == [1, 2]
    llm.reset()
    bad = [
        (CacheState([1, -1], good.k, good.v), r"token #1 is -1"),
        (CacheState([1] * 17, good.k, good.v), "17 tokens > n_ctx 16"),
        (CacheState([1, 2], good.k[:1], good.v), "'k' must hold 2 arrays"),
        (CacheState([1, 2], good.k, [row[:1]] * n_layer), r"v\[0\] must be float\[2, 2, 16\]"),
        (CacheState([1, 2], good.k, [row.astype(np.int32)] * n_layer), r"v\[0\] must be"),
        ({"tokens": [1]}, "needs a CacheState"),
    ]
    for state, match in bad:
        with pytest.raises(ValueError, match=match):
            llm.load_state(state)  # type: ignore[arg-type]
        assert llm.tokens == []


def test_reader_keeps_the_tensor_of_an_edited_file(tiny: bytes, tmp_path: Path) -> None:
    # the codec round trip is exact, so the edits above change only what they say
    assert encode(decode(tiny)) == tiny
    f = read_gguf(_edited(tmp_path, tiny, lambda g: None))
    assert f.tensors["blk.0.attn_k.weight"].shape == (kvd, N_EMBD)
