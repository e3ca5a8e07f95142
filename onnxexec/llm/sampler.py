"""Token sampling with llama.cpp's semantics and order (common/sampling.cpp chain):
logit bias -> penalties -> top-k -> top-p -> min-p -> temperature -> draw.

Temperature 0 is greedy: the first index of the maximum logit, like llama.cpp's
greedy sampler. A seed makes draws reproducible.
"""

from __future__ import annotations

import math
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
        """ValueError stating the allowed range; NaN fails every check (comparisons
        with NaN are false, so each is written as `not <valid>`)."""
        for name in ("temperature", "top_p", "min_p", "repeat_penalty"):
            _check_number(self, name)
        for name in ("presence_penalty", "frequency_penalty"):
            _check_number(self, name)
        for name in ("top_k", "penalty_last_n"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be an integer, got {v!r}")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if not self.repeat_penalty > 0:
            raise ValueError(f"repeat_penalty must be > 0, got {self.repeat_penalty}")
        if self.penalty_last_n < -1:
            raise ValueError(
                f"penalty_last_n must be >= -1 (-1 or 0: all), got {self.penalty_last_n}"
            )
        for tok, bias in dict(self.logit_bias).items():
            if isinstance(tok, bool) or not isinstance(tok, int) or tok < 0:
                raise ValueError(f"logit_bias: token id {tok!r} is not an integer >= 0")
            if isinstance(bias, bool) or not isinstance(bias, int | float) or math.isnan(bias):
                raise ValueError(f"logit_bias[{tok}] = {bias!r} is not a number")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0
        ):
            raise ValueError(f"seed must be None or an integer >= 0, got {self.seed!r}")


def _check_number(p: SamplingParams, name: str) -> None:
    v = getattr(p, name)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v!r}")


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
            if tok >= x.size:
                raise ValueError(f"logit_bias: token id {tok} is not below the {x.size} logits")
            x[tok] += bias
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
