"""Sampler semantics on hand-made logits (llama.cpp's definitions)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxexec.llm.sampler import Sampler, SamplingParams, apply_penalties


def test_greedy_takes_first_maximum():
    s = Sampler(SamplingParams(temperature=0))
    assert s(np.array([1.0, 3.0, 3.0, 2.0])) == 1


def test_top_k_one_is_greedy_at_any_temperature():
    s = Sampler(SamplingParams(temperature=5.0, top_k=1, top_p=1.0, min_p=0.0, seed=1))
    assert {s(np.array([0.0, 2.0, 1.9])) for _ in range(50)} == {1}


def test_top_p_keeps_smallest_prefix_reaching_p():
    # probabilities ~ [0.5, 0.3, 0.2]: top_p 0.6 keeps {0, 1}, never 2
    logits = np.log(np.array([0.5, 0.3, 0.2]))
    s = Sampler(SamplingParams(temperature=1.0, top_k=0, top_p=0.6, min_p=0.0, seed=0))
    draws = {s(logits) for _ in range(300)}
    assert draws == {0, 1}


def test_min_p_drops_tokens_below_fraction_of_best():
    logits = np.log(np.array([0.6, 0.3, 0.05, 0.05]))
    s = Sampler(SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.2, seed=0))
    assert {s(logits) for _ in range(300)} == {0, 1}


def test_seed_reproduces_sequence():
    logits = np.zeros(50)
    p = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=42)
    a, b = Sampler(p), Sampler(p)
    assert [a(logits) for _ in range(20)] == [b(logits) for _ in range(20)]


def test_penalties_follow_llama_cpp():
    logits = np.array([2.0, -2.0, 1.0, 0.5])
    p = SamplingParams(repeat_penalty=2.0, frequency_penalty=0.1, presence_penalty=0.25)
    apply_penalties(logits, [0, 1, 1, 3], p)
    # token 0: 2/2 - 1*0.1 - 0.25; token 1: -2*2 - 2*0.1 - 0.25; token 3: 0.5/2 - 0.1 - 0.25
    np.testing.assert_allclose(logits, [0.65, -4.45, 1.0, -0.1])


def test_logit_bias_can_force_a_token():
    s = Sampler(SamplingParams(temperature=0, logit_bias={3: 100.0}))
    assert s(np.array([5.0, 4.0, 3.0, 0.0])) == 3


@pytest.mark.parametrize(
    "kw", [{"temperature": -1}, {"top_p": 0.0}, {"min_p": 2.0}, {"repeat_penalty": 0.0}]
)
def test_invalid_params_are_rejected(kw):
    with pytest.raises(ValueError):
        SamplingParams(**kw)
