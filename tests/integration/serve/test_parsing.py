"""Request parsing, tool-call parsing, stop-string hold-back and grammar masks (no server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onnxexec.serve.generation import held_back
from onnxexec.serve.openai_schema import APIError, parse_chat, parse_completion
from onnxexec.serve.tools import (
    forced_call_schema,
    messages_with_tools,
    parse_tool_calls,
    template_supports_tools,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def chat(**kw):
    return parse_chat({"messages": [{"role": "user", "content": "hi"}], **kw})


def test_chat_fields_and_openai_defaults():
    r = chat(
        max_completion_tokens=7,
        max_tokens=3,
        stop="END",
        seed=-1,
        top_logprobs=2,
        logprobs=True,
        logit_bias={"5": -100},
        stream=True,
        stream_options={"include_usage": True},
    )
    p = r.params
    assert p.max_tokens == 7  # max_completion_tokens wins (the newer name)
    assert p.stop == ["END"] and p.top_logprobs == 2 and p.logit_bias == {5: -100.0}
    assert p.seed == (1 << 63) - 1 and p.stream and p.include_usage
    d = chat().params
    assert (d.temperature, d.top_p, d.top_k, d.min_p, d.n) == (1.0, 1.0, 0, 0.0, 1)
    parts = parse_chat(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                }
            ]
        }
    )
    assert parts.messages[0]["content"] == "ab"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"temperature": 3}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_logprobs": 3}, "top_logprobs"),  # needs logprobs: true
        ({"n": 0}, "n"),
        ({"stop": [1]}, "stop"),
        ({"logit_bias": {"x": 1}}, "logit_bias"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
        ),
    ],
)
def test_bad_fields_are_400_naming_the_param(body, param):
    with pytest.raises(APIError) as e:
        chat(**body)
    assert e.value.status == 400 and e.value.body()["error"]["param"] == param


def test_completion_prompt_forms():
    assert parse_completion({"prompt": "x"}).prompts == ["x"]
    assert parse_completion({"prompt": [1, 2]}).prompts == [[1, 2]]
    assert parse_completion({"prompt": ["a", "b"], "logprobs": 2}).params.top_logprobs == 2
    with pytest.raises(APIError):
        parse_completion({"prompt": 3})


def test_tool_calls_parsed_from_hermes_and_llama3_formats():
    text = 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    content, calls = parse_tool_calls(text, TOOLS)
    assert content == "Sure." and calls[0].name == "get_weather"
    assert json.loads(calls[0].arguments) == {"city": "Paris"}
    _, calls = parse_tool_calls('{"name": "get_weather", "parameters": {"city": "Rome"}}', TOOLS)
    assert json.loads(calls[0].arguments) == {"city": "Rome"}
    assert parse_tool_calls('{"name": "other", "arguments": {}}', TOOLS) == (
        '{"name": "other", "arguments": {}}',
        [],
    )
    assert parse_tool_calls("plain text", TOOLS) == ("plain text", [])


def test_tools_rendered_for_a_template_without_tool_support():
    assert not template_supports_tools("{{ messages }}")
    assert template_supports_tools("{% if tools %}{{ tools }}{% endif %}")
    msgs = messages_with_tools(
        [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
                ],
            },
            {"role": "tool", "content": "sunny"},
        ],
        TOOLS,
    )
    assert msgs[0]["role"] == "system" and '"name": "get_weather"' in msgs[0]["content"]
    assert "<tool_call>" in msgs[2]["content"] and "sunny" in msgs[3]["content"]
    schema = forced_call_schema(TOOLS, "required")
    assert schema["properties"]["name"] == {"const": "get_weather"}


def test_held_back_keeps_a_possible_stop_prefix():
    assert held_back("Hello wor", ["world"]) == 3
    assert held_back("Hello", ["world"]) == 0
    assert held_back("ab", ["abc", "bx"]) == 2


def test_grammar_mask_allows_exactly_the_schema():
    pytest.importorskip("llguidance", reason="llguidance (the serve extra) is not installed")
    from onnxexec.llm import load_tokenizer
    from onnxexec.serve.grammar import GrammarFactory
    from tests.integration.serve.conftest import smollm2_path

    tok = load_tokenizer(smollm2_path())
    f = GrammarFactory(tok, tok.eos_id, sorted(tok.eog_ids))
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    m = f.matcher(f.json_schema(schema))
    rng = np.random.default_rng(0)
    out: list[int] = []
    for _ in range(20):  # random logits: whatever is sampled, the text must be valid
        logits = rng.standard_normal(tok.vocab_size).astype(np.float32)
        m.apply(logits)
        t = int(np.argmax(logits))
        if t in tok.eog_ids:
            break
        m.advance(t)
        out.append(t)
    assert json.loads(tok.decode(out)) in ({"ok": True}, {"ok": False})
    assert m.done


def test_health_is_503_while_loading_and_500_after_a_failed_load(tmp_path):
    import asyncio

    from onnxexec.serve import ServeConfig
    from onnxexec.serve.state import ServerState

    st = ServerState(ServeConfig(model=str(tmp_path / "broken.gguf")))
    with pytest.raises(APIError) as e:
        st.check_ready()
    assert e.value.status == 503 and e.value.body()["error"]["type"] == "unavailable_error"
    (tmp_path / "broken.gguf").write_bytes(b"not a gguf file")
    st.load(asyncio.new_event_loop())
    with pytest.raises(APIError) as e:
        st.check_ready()
    assert e.value.status == 500 and "broken.gguf" in e.value.message
