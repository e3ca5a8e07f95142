"""The per-request sampler the batching engine calls once per token.

It owns everything a request decides for itself: the grammar mask (response_format,
forced tool calls), llama.cpp's sampling chain (onnxexec.llm.sampler: logit bias ->
penalties -> top-k -> top-p -> min-p -> temperature), its own token history for the
penalties (prompt + generated, as llama-server feeds the prompt to its sampler) and
the logprobs OpenAI reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from onnxexec.llm.sampler import Sampler, SamplingParams

if TYPE_CHECKING:
    from onnxexec.serve.grammar import Matcher
    from onnxexec.serve.openai_schema import GenParams


@dataclass(frozen=True)
class TokenLogprob:
    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (id, logprob), most likely first


def sampling_params(p: GenParams, n_vocab: int, seed_offset: int = 0) -> SamplingParams:
    """OpenAI's knobs as llm.SamplingParams (its defaults differ: top_k 40, min_p 0.05)."""
    bias = {t: b for t, b in p.logit_bias.items() if 0 <= t < n_vocab}
    return SamplingParams(
        temperature=p.temperature,
        top_k=p.top_k,
        top_p=p.top_p,
        min_p=p.min_p,
        repeat_penalty=p.repeat_penalty,
        presence_penalty=p.presence_penalty,
        frequency_penalty=p.frequency_penalty,
        logit_bias=bias,
        seed=None if p.seed is None else (p.seed + seed_offset) % (1 << 63),
    )


def log_softmax(x: np.ndarray) -> np.ndarray:
    """(V,) float32 logits -> (V,) float64 log-probabilities (finite-safe)."""
    z = x.astype(np.float64)
    m = np.max(z)
    return z - (m + np.log(np.sum(np.exp(z - m))))


class RequestSampler:
    """Callable (V,) float32 logits -> token id, recording logprobs when asked.

    Logprobs are those of the model's distribution (raw logits, before bias, penalties
    and grammar), as OpenAI reports them. `logprobs` is appended to from the engine's
    thread and read by the server in token order after each token's event.
    """

    def __init__(
        self,
        params: SamplingParams,
        prompt: list[int],
        *,
        matcher: Matcher | None = None,
        logprobs: bool = False,
        top_logprobs: int = 0,
    ) -> None:
        self._sampler = Sampler(params)
        self.history = list(prompt)
        self.matcher = matcher
        self.want_logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.logprobs: list[TokenLogprob] = []

    def __call__(self, logits: np.ndarray) -> int:
        lp = log_softmax(logits) if self.want_logprobs else None
        if self.matcher is not None:
            self.matcher.apply(logits)
        tok = self._sampler(logits, self.history)
        if self.matcher is not None:
            self.matcher.advance(tok)
        self.history.append(tok)
        if lp is not None:
            top: tuple[tuple[int, float], ...] = ()
            if self.top_logprobs:
                k = self.top_logprobs
                idx = np.argpartition(-lp, k - 1)[:k]
                idx = idx[np.argsort(-lp[idx], kind="stable")]
                top = tuple((int(i), float(lp[i])) for i in idx)
            self.logprobs.append(TokenLogprob(tok, float(lp[tok]), top))
        return tok
