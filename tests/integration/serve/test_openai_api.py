"""The official `openai` client against `onnxexec serve` (SmolLM2, 4 slots) on 127.0.0.1.

Oracles: greedy text equals onnxexec.llm.generate on a separate LLM (the batching
engine's guarantee); the prompt equals SmolLM2's ChatML template written out here;
logprobs equal a float64 log-softmax of a separate LLM's teacher-forced logits;
json_schema output validates with `jsonschema`; errors are OpenAI's objects.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.integration.serve.conftest import http, need_serve_extra, running_server, smollm2_path

need_serve_extra()
openai = pytest.importorskip("openai", reason="the openai client is not installed")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")

KEY = "sk-test-key"
N_CTX = 512
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@pytest.fixture(scope="module")
def server():
    from onnxexec.serve import ServeConfig

    cfg = ServeConfig(model=str(smollm2_path()), n_ctx=N_CTX, parallel=4, api_key=KEY, queue=8)
    with running_server(cfg) as url:
        yield url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def ref_llm():
    from onnxexec.llm import LLM

    return LLM(smollm2_path(), n_ctx=N_CTX)


def chatml(user: str) -> str:
    """SmolLM2's template (tokenizer.chat_template) for one user turn, written out."""
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def greedy_alone(llm, text: str, n: int):
    from onnxexec.llm import SamplingParams, generate

    ids = llm.tokenizer.encode(text, add_special=True, parse_special=True)
    return ids, generate(llm, ids, max_tokens=n, params=SamplingParams(temperature=0))


def test_chat_greedy_equals_generate_alone(client, ref_llm):
    r = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "Name a color."}],
        max_tokens=12,
        temperature=0,
    )
    ids, ref = greedy_alone(ref_llm, chatml("Name a color."), 12)
    assert r.choices[0].message.content == ref.text
    assert r.choices[0].message.role == "assistant"
    assert r.usage.prompt_tokens == len(ids)
    assert r.usage.completion_tokens == len(ref.tokens)
    assert r.choices[0].finish_reason == ("length" if ref.stop_reason == "length" else "stop")
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")


def test_stream_equals_blocking_and_ends_with_usage(client, server):
    msgs = [{"role": "user", "content": "Tell me a fact about cats."}]
    full = client.chat.completions.create(model="x", messages=msgs, max_tokens=10, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model="x",
            messages=msgs,
            max_tokens=10,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == full.choices[0].finish_reason and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == full.usage.total_tokens
    # the raw stream ends with OpenAI's sentinel
    body = {"messages": msgs, "max_tokens": 2, "stream": True}
    raw = http("POST", server + "/v1/chat/completions", body, KEY).text
    assert raw.rstrip().endswith("data: [DONE]")


def test_completions_and_stop(client, ref_llm):
    prompt = "The capital of France is"
    r = client.completions.create(model="x", prompt=prompt, max_tokens=8, temperature=0)
    _, ref = greedy_alone(ref_llm, prompt, 8)
    assert r.choices[0].text == ref.text
    first = ref.text.strip()[:3]
    cut = client.completions.create(
        model="x", prompt=prompt, max_tokens=8, temperature=0, stop=[first]
    )
    assert cut.choices[0].text == ref.text[: ref.text.index(first)]
    assert cut.choices[0].finish_reason == "stop"


def test_logprobs_match_teacher_forced_logits(client, ref_llm):
    r = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=5,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    content = r.choices[0].logprobs.content
    ids = ref_llm.tokenizer.encode(chatml("Hi"), add_special=True, parse_special=True)
    ref_llm.reset()
    logits = ref_llm.eval(ids)[-1]
    for item in content:
        z = logits.astype(np.float64)
        lp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
        tok = int(np.argmax(lp))  # greedy: the chosen token is the most likely one
        assert item.top_logprobs[0].token == item.token
        assert bytes(item.bytes) == ref_llm.tokenizer.token_to_piece(tok)
        assert item.logprob == pytest.approx(lp[tok], abs=2e-3)
        top3 = np.sort(lp)[::-1][:3]
        np.testing.assert_allclose([t.logprob for t in item.top_logprobs], top3, atol=2e-3)
        logits = ref_llm.eval([tok])[-1]


def test_json_schema_output_validates(client):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 2},
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    }
    for temperature in (0, 1.0):
        r = client.chat.completions.create(
            model="x",
            messages=[{"role": "user", "content": "Describe a person."}],
            max_tokens=80,
            temperature=temperature,
            seed=3,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": schema},
            },
        )
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        jsonschema.validate(json.loads(r.choices[0].message.content), schema)
    r = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "Any JSON object."}],
        max_tokens=60,
        temperature=0,
        response_format={"type": "json_object"},
    )
    text = r.choices[0].message.content
    assert text.lstrip().startswith("{")  # json_object: an object from the first token on
    if r.choices[0].finish_reason == "stop":  # complete (not cut by max_tokens): it parses
        assert isinstance(json.loads(text), dict)


def test_forced_tool_call(client):
    params = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24}},
        "required": ["city"],
        "additionalProperties": False,
    }
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": params}},
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}},
    ]
    r = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        max_tokens=40,
        temperature=0,
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    (call,) = ch.message.tool_calls
    assert call.function.name == "get_weather" and call.type == "function"
    jsonschema.validate(json.loads(call.function.arguments), params)


def test_streamed_tool_call_is_incremental_and_equals_blocking(client):
    """The openai client's own stream accumulator (ChatCompletionStreamState) over the
    delta.tool_calls chunks gives the call the blocking request returns (greedy)."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    params = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24}},
        "required": ["city"],
        "additionalProperties": False,
    }
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]
    kw = dict(
        model="x",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        max_tokens=40,
        temperature=0,
        tools=tools,
        tool_choice="required",
    )
    blocking = client.chat.completions.create(**kw).choices[0]
    state = ChatCompletionStreamState(input_tools=tools)
    kinds = []  # the order of tool-call chunks: "header", then "args" fragments
    for c in client.chat.completions.create(stream=True, **kw):
        state.handle_chunk(c)
        for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            kinds.append("header" if tc.id else "args")
            assert tc.index == 0
    got = state.get_final_completion().choices[0]
    assert blocking.finish_reason == got.finish_reason == "tool_calls"
    (want,), (call,) = blocking.message.tool_calls, got.message.tool_calls
    assert (call.function.name, call.function.arguments) == (
        want.function.name,
        want.function.arguments,
    )
    jsonschema.validate(json.loads(call.function.arguments), params)
    assert kinds[0] == "header" and kinds.count("header") == 1
    assert kinds.count("args") >= 3  # sent in pieces as generated, not at once


def test_n_choices_and_seed_reproducible(client):
    kw = dict(
        model="x",
        messages=[{"role": "user", "content": "Say something."}],
        max_tokens=6,
        temperature=1.0,
        n=2,
        seed=42,
    )
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]


def test_errors_are_openai_objects(server, client):
    bad_key = openai.OpenAI(base_url=server + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad_key.models.list()
    assert e.value.status_code == 401
    assert http("GET", server + "/v1/models").status == 401  # no key at all
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="x", messages=[{"role": "user", "content": "word " * 600}], max_tokens=4
        )
    assert str(N_CTX) in e.value.message and e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="x", messages=[], max_tokens=4)
    assert e.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="x", messages=[{"role": "user", "content": "x"}], temperature=-1
        )


def test_models_tokenize_props_metrics(server, client, ref_llm):
    models = client.models.list()
    assert [m.id for m in models.data] == [smollm2_path().name]
    tok = http("POST", server + "/tokenize", {"content": "Hello world"}, KEY).json()
    assert tok["tokens"] == ref_llm.tokenizer.encode("Hello world", add_special=False)
    back = http("POST", server + "/detokenize", tok, KEY).json()
    assert back["content"] == "Hello world"
    props = http("GET", server + "/props", key=KEY).json()
    assert props["n_ctx"] == N_CTX and props["total_slots"] == 4
    assert props["chat_template"] == ref_llm.gguf.metadata["tokenizer.chat_template"]
    assert http("GET", server + "/health").json() == {"status": "ok"}  # public
    text = http("GET", server + "/metrics", key=KEY).text
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert values["onnxexec:tokens_predicted_total"] > 0
    assert values["onnxexec:requests_deferred"] == 0
    assert 0 < values["onnxexec:kv_cache_usage_ratio"] <= 1
    assert values['onnxexec:requests_total{route="/v1/models",status="401"}'] >= 1
    assert values["onnxexec:predicted_tokens_seconds"] > 0
