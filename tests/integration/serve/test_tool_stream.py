"""Streamed tool calls (serve/tool_stream.py) against the blocking parser.

Oracle: `parse_tool_calls` (json.loads of each whole block) on the complete text; the
streamed deltas, accumulated as the openai client accumulates them (ids and names from
the first chunk of an index, arguments concatenated), must give the same content and
calls, for every chunking of the text, and a call's header must arrive before its
block is complete (incremental).
"""

from __future__ import annotations

import json
import random

import pytest

from onnxexec.serve.tool_stream import ToolCallStream
from onnxexec.serve.tools import parse_tool_calls

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
    {"type": "function", "function": {"name": "add", "parameters": {}}},
]

HERMES_ONE = (
    'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
    '{"city": "Paris", "days": [1, 2], "note": "a \\"quoted\\" } brace"}}\n</tool_call>'
)
HERMES_TWO = (
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": {"c": [true, null]}}}\n'
    '</tool_call>\n<tool_call>\n{"arguments": {"city": "Oslo"}, "name": "get_weather"}\n'
    "</tool_call>"
)
LLAMA3 = '{"name": "get_weather", "parameters": {"city": "Rome"}}'
NO_ARGS = '<tool_call>{"name": "add"}</tool_call>'
STRING_ARGS = '<tool_call>{"name": "add", "arguments": "{\\"a\\": 2}"}</tool_call>'
UNKNOWN_THEN_KNOWN = (
    'x <tool_call>{"name": "nope", "arguments": {}}</tool_call>'
    '<tool_call>{"name": "add", "arguments": {"a": 3}}</tool_call>'
)
PLAIN = "Just text, mentioning <tool and { braces }."
NOT_A_TOOL = '{"name": "other", "arguments": {}}'
ALL = [HERMES_ONE, HERMES_TWO, LLAMA3, NO_ARGS, STRING_ARGS, UNKNOWN_THEN_KNOWN, PLAIN, NOT_A_TOOL]


def accumulate(deltas: list[dict]) -> tuple[str, list[dict]]:
    """Content and calls as the openai client's stream accumulator builds them."""
    content, calls = "", {}
    for d in deltas:
        content += d.get("content", "")
        for tc in d.get("tool_calls", []):
            c = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            if "id" in tc:
                assert c["id"] is None, "a second header for one index"
                c["id"], c["name"] = tc["id"], tc["function"]["name"]
            c["arguments"] += tc["function"].get("arguments", "")
    assert sorted(calls) == list(range(len(calls)))
    return content, [calls[i] for i in sorted(calls)]


def streamed(text: str, cuts: list[int]) -> list[dict]:
    s = ToolCallStream.for_tools(TOOLS)
    out, prev = [], 0
    for c in [*cuts, len(text)]:
        out += s.push(text[prev:c])
        prev = c
    return out + s.finish()


def chunkings(text: str, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    ways = [[], list(range(1, len(text)))]  # whole, one char at a time
    for _ in range(6):
        k = rng.randint(1, max(1, len(text) // 3))
        ways.append(sorted(rng.sample(range(1, len(text)), min(k, len(text) - 1))))
    return ways


@pytest.mark.parametrize("text", ALL)
def test_any_chunking_accumulates_to_the_blocking_parse(text):
    want_content, want_calls = parse_tool_calls(text, TOOLS)
    for cuts in chunkings(text, seed=len(text)):
        content, calls = accumulate(streamed(text, cuts))
        assert [(c["name"], c["arguments"]) for c in calls] == [
            (w.name, w.arguments) for w in want_calls
        ]
        for c in calls:
            json.loads(c["arguments"])  # complete calls carry valid JSON
            assert c["id"].startswith("call_")
        if want_calls:
            assert content == want_content
        else:  # no call: the reply is content (leading whitespace aside)
            assert content == text.lstrip()


def test_header_and_arguments_arrive_before_the_block_ends():
    s = ToolCallStream.for_tools(TOOLS)
    first_header = first_args = None
    for i, ch in enumerate(HERMES_ONE):
        for d in s.push(ch):
            for tc in d.get("tool_calls", []):
                if "id" in tc and first_header is None:
                    first_header = i
                elif tc["function"].get("arguments") and first_args is None:
                    first_args = i
    s.finish()
    name_end = HERMES_ONE.index('"get_weather"') + len('"get_weather"')
    assert first_header == name_end - 1  # the header as soon as the name string closes
    assert first_args == HERMES_ONE.index('{"city"')  # the arguments from their first char
    s = ToolCallStream.for_tools(TOOLS)  # content is streamed before any call
    assert s.push(HERMES_ONE[:8]) == [{"content": "Let me c"}]


def test_content_holds_back_a_possible_call_start_only():
    s = ToolCallStream.for_tools(TOOLS)
    assert s.push("Hello <tool") == [{"content": "Hello"}]
    assert s.push("box") == [{"content": " <toolbox"}]
    assert s.finish() == []
