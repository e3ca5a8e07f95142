"""Token sampling with llama.cpp's semantics and order (common/sampling.cpp chain):
logit bias -> penalties -> top-k -> top-p -> min-p -> temperature -> draw.

Temperature 0 is greedy: the first index of the maximum logit, like llama.cpp's
greedy sampler. A seed makes draws reproducible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class SamplingParams:
    temperature: float = 0.8
    top_k: int = 40  # 0 = disabled
    top_p: float = 0.95  # 1.0 = disabled
    min_p: float = 0.05  # 0.0 = disabled
    repeat_penalty: float = 1.0  # 1.0 = disabled
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    penalty_last_n: int = 64  # window of recent tokens the penalties look at
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if self.repeat_penalty <= 0:
            raise ValueError(f"repeat_penalty must be > 0, got {self.repeat_penalty}")


def apply_penalties(logits: np.ndarray, recent: Sequence[int], p: SamplingParams) -> None:
    """In place, as llama_sampler_penalties: each distinct recent token once for the
    repeat penalty (divide positive logits, multiply negative ones), then subtract
    count * frequency + presence."""
    if not recent or (
        p.repeat_penalty == 1.0 and not p.presence_penalty and not p.frequency_penalty
    ):
        return
    window = recent[-p.penalty_last_n :] if p.penalty_last_n > 0 else recent
    for tok, count in Counter(window).items():
        v = logits[tok]
        v = v / p.repeat_penalty if v > 0 else v * p.repeat_penalty
        logits[tok] = v - count * p.frequency_penalty - p.presence_penalty


class Sampler:
    """Stateful sampler: holds the RNG so a seed gives one reproducible sequence."""

    def __init__(self, params: SamplingParams | None = None) -> None:
        self.params = params or SamplingParams()
        self.rng = np.random.default_rng(self.params.seed)

    def __call__(self, logits: np.ndarray, recent: Sequence[int] = ()) -> int:
        p = self.params
        x = np.array(logits, dtype=np.float64).reshape(-1)
        for tok, bias in p.logit_bias.items():
            x[int(tok)] += bias
        apply_penalties(x, recent, p)
        if p.temperature == 0:
            return int(np.argmax(x))
        ids = np.arange(x.size)
        if 0 < p.top_k < x.size:
            keep = np.argpartition(-x, p.top_k - 1)[: p.top_k]
            ids, x = ids[keep], x[keep]
        order = np.argsort(-x, kind="stable")
        ids, x = ids[order], x[order]
        probs = np.exp(x - x[0])
        probs /= probs.sum()
        if p.top_p < 1.0:
            # smallest prefix whose cumulative probability reaches top_p (at least one)
            n = int(np.searchsorted(np.cumsum(probs), p.top_p) + 1)
            ids, x, probs = ids[:n], x[:n], probs[:n]
        if p.min_p > 0.0:
            keep = probs >= p.min_p * probs[0]
            ids, x = ids[keep], x[keep]
        z = x / p.temperature
        w = np.exp(z - z.max())
        w /= w.sum()
        return int(ids[self.rng.choice(w.size, p=w)])
