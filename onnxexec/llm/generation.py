"""Text generation on an LLM: a streaming iterator and a blocking call sharing one loop."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from onnxexec.llm.sampler import Sampler, SamplingParams

if TYPE_CHECKING:
    from onnxexec.llm.model import LLM


@dataclass
class GenerationResult:
    text: str = ""
    tokens: list[int] = field(default_factory=list)  # generated ids
    prompt_tokens: list[int] = field(default_factory=list)  # prompt ids incl. BOS
    n_reused: int = 0  # prompt tokens served from the KV cache
    prefill_s: float = 0.0
    decode_s: float = 0.0
    stop_reason: str = ""  # "eog" | "length" | "stop" | "context"

    @property
    def prefill_tok_s(self) -> float:
        n = len(self.prompt_tokens) - self.n_reused
        return n / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tok_s(self) -> float:
        # the first token comes from the prefill logits; later ones each cost one eval
        n = max(len(self.tokens) - 1, 0)
        return n / self.decode_s if self.decode_s > 0 else 0.0


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing chars could still be the start of a stop string."""
    keep = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:n]):
                keep = max(keep, n)
                break
    return keep


def stream(
    llm: LLM,
    prompt: str | Sequence[int],
    max_tokens: int = 128,
    params: SamplingParams | None = None,
    stop: Sequence[str] = (),
    result: GenerationResult | None = None,
    parse_special: bool = True,
) -> Iterator[str]:
    """Yield text pieces as they are produced; fills `result` (if given) as it goes.

    A prompt that shares a prefix with the tokens already in the KV cache evaluates
    only the new tokens.
    """
    from onnxexec.llm.tokenizer import StreamDecoder

    res = result if result is not None else GenerationResult()
    tok = llm.tokenizer
    ids = (
        tok.encode(prompt, add_special=True, parse_special=parse_special)
        if isinstance(prompt, str)
        else [int(t) for t in prompt]
    )
    if not ids:
        raise ValueError("the prompt encodes to no tokens")
    res.prompt_tokens = list(ids)
    res.n_reused = llm.reuse_prefix(ids)
    sampler = Sampler(params)
    t0 = time.perf_counter()
    logits = llm.eval(ids[res.n_reused :])
    res.prefill_s = time.perf_counter() - t0
    decoder = StreamDecoder(tok)
    pending = ""
    t1 = time.perf_counter()
    while True:
        if len(res.tokens) >= max_tokens:
            res.stop_reason = "length"
            break
        t = sampler(logits[-1], llm.tokens)
        if tok.is_eog(t):
            res.stop_reason = "eog"
            break
        res.tokens.append(t)
        pending += decoder.push(t)
        hit = [pending.find(s) for s in stop if s in pending]
        if hit:
            pending = pending[: min(hit)]
            res.text += pending
            if pending:
                yield pending
            res.stop_reason = "stop"
            break
        keep = _held_back(pending, stop)
        out, pending = pending[: len(pending) - keep], pending[len(pending) - keep :]
        if out:
            res.text += out
            yield out
        if len(res.tokens) >= max_tokens:
            res.stop_reason = "length"
            break
        if llm.n_past >= llm.n_ctx:
            res.stop_reason = "context"
            break
        logits = llm.eval([t])
    if res.stop_reason != "stop":
        pending += decoder.flush()
        if pending:
            res.text += pending
            yield pending
    res.decode_s = time.perf_counter() - t1


def generate(
    llm: LLM,
    prompt: str | Sequence[int],
    max_tokens: int = 128,
    params: SamplingParams | None = None,
    stop: Sequence[str] = (),
    parse_special: bool = True,
) -> GenerationResult:
    """Blocking generation: the whole result with token ids and timings."""
    res = GenerationResult()
    for _ in stream(llm, prompt, max_tokens, params, stop, res, parse_special):
        pass
    return res
