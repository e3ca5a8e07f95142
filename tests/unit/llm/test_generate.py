"""generate()/stream(): stop strings, max_tokens, EOG, context end, prompt reuse, timing."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.llm.generation import GenerationResult, generate, stream
from onnxexec.llm.model import LLM
from onnxexec.llm.sampler import SamplingParams
from onnxexec.llm.tokenizer import load_tokenizer
from tests.unit.llm._tiny import write_tiny_gguf

GREEDY = SamplingParams(temperature=0)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("g") / "llama.gguf", "llama")


class ScriptedLLM:
    """The LLM interface generate() uses, emitting a fixed token script (one-hot logits)."""

    def __init__(self, path, script: list[int], n_ctx: int = 64) -> None:
        self.tokenizer = load_tokenizer(path)
        self.script = list(script)
        self.n_ctx = n_ctx
        self.tokens: list[int] = []
        self.evals: list[list[int]] = []

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def reuse_prefix(self, tokens) -> int:
        n = 0
        while n < min(len(self.tokens), len(tokens) - 1) and self.tokens[n] == tokens[n]:
            n += 1
        self.tokens = self.tokens[:n]
        return n

    def eval(self, tokens, all_logits=False):
        self.evals.append(list(tokens))
        self.tokens += list(tokens)
        logits = np.zeros((1, self.tokenizer.vocab_size), np.float32)
        logits[0, self.script.pop(0)] = 1.0
        return logits


def ids_of(tok, text: str) -> list[int]:
    return tok.encode(text, add_special=False)


def test_max_tokens_and_text(path):
    tok = load_tokenizer(path)
    script = ids_of(tok, "at the rat in the sun")
    llm = ScriptedLLM(path, [*script, 2])
    res = generate(llm, "the cat", max_tokens=3, params=GREEDY)
    assert res.tokens == script[:3] and res.stop_reason == "length"
    assert res.text == tok.decode(script[:3])
    assert res.prompt_tokens == tok.encode("the cat", add_special=True)
    # the first token comes from the prompt's logits: one eval per later token
    assert [len(e) for e in llm.evals] == [len(res.prompt_tokens), 1, 1]


def test_eog_stops_without_emitting_it(path):
    tok = load_tokenizer(path)
    script = [*ids_of(tok, "the rat"), tok.eos_id, 5]
    res = generate(ScriptedLLM(path, script), "x", max_tokens=10, params=GREEDY)
    assert res.stop_reason == "eog" and res.tokens == script[:-2]
    assert res.text == "the rat"


def test_stop_string_across_tokens_is_cut_and_never_streamed(path):
    tok = load_tokenizer(path)
    script = [*ids_of(tok, "on a mat. STOP here"), 2]
    res = GenerationResult()
    pieces = list(stream(ScriptedLLM(path, script), "x", 50, GREEDY, stop=["STOP"], result=res))
    assert res.stop_reason == "stop"
    assert "".join(pieces) == res.text == "on a mat. "
    assert not any("S" in p for p in pieces)


def test_partial_stop_prefix_is_released_at_the_end(path):
    tok = load_tokenizer(path)
    script = ids_of(tok, "the ST")
    res = generate(
        ScriptedLLM(path, [*script, 9]), "x", max_tokens=len(script), params=GREEDY, stop=["STOP"]
    )
    assert res.stop_reason == "length" and res.text == "the ST"


def test_context_end(path):
    tok = load_tokenizer(path)
    prompt = tok.encode("the cat", add_special=True)
    llm = ScriptedLLM(path, ids_of(tok, "the rat sat on the mat"), n_ctx=len(prompt) + 2)
    res = generate(llm, prompt, max_tokens=10, params=GREEDY)
    assert res.stop_reason == "context" and len(res.tokens) == 3


def test_real_model_greedy_matches_argmax_loop_and_reuses_prompt(path):
    llm = LLM(path, n_ctx=64)
    res = generate(llm, "the cat sat", max_tokens=6, params=GREEDY)
    ids = llm.tokenizer.encode("the cat sat")
    ref = LLM(path, n_ctx=64)
    logits, want = ref.eval(ids), []
    for _ in range(6):
        want.append(int(np.argmax(logits[-1])))
        logits = ref.eval([want[-1]])
    assert res.tokens == want and res.n_reused == 0
    assert res.prefill_tok_s > 0 and res.decode_tok_s > 0
    again = generate(llm, "the cat sat on", max_tokens=2, params=GREEDY)
    assert again.n_reused == len(ids)  # "the cat sat" is still in the cache


def test_seeded_sampling_is_reproducible(path):
    llm = LLM(path, n_ctx=64)
    p = SamplingParams(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=123)
    a = generate(llm, "the", max_tokens=8, params=p).tokens
    llm.reset()
    b = generate(llm, "the", max_tokens=8, params=p).tokens
    assert a == b
