"""OpenAI request bodies -> checked dataclasses, and OpenAI's JSON error objects.

Field names, defaults and ranges follow the OpenAI API reference (chat/create,
completions/create) plus llama-server's extensions (top_k, min_p, repeat_penalty).
A bad field is a 400 whose message and `param` name it, as OpenAI answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from onnxexec.errors import OnnxExecError


class APIError(OnnxExecError):
    """An HTTP error with OpenAI's body: {"error": {message, type, param, code}}."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


@dataclass
class GenParams:
    """What the chat and completion endpoints share: sampling, limits, stops, logprobs."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repeat_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: bool = False
    top_logprobs: int = 0
    n: int = 1
    stream: bool = False
    include_usage: bool = False


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]
    params: GenParams
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"


@dataclass
class CompletionRequest:
    prompts: list[str | list[int]]
    params: GenParams
    echo: bool = False


def _num(body: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise bad(f"'{key}' must be a number, got {v!r:.40}", key)
    if not lo <= v <= hi:
        raise bad(f"'{key}' must be in [{lo}, {hi}], got {v}", key)
    return float(v)


def _int(body: dict[str, Any], key: str, default: int | None, lo: int, hi: int) -> int | None:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad(f"'{key}' must be an integer, got {v!r:.40}", key)
    if not lo <= v <= hi:
        raise bad(f"'{key}' must be in [{lo}, {hi}], got {v}", key)
    return v


def _gen_params(body: dict[str, Any], chat: bool) -> GenParams:
    p = GenParams()
    # max_completion_tokens replaces max_tokens in the chat API; either is accepted
    mt = _int(body, "max_completion_tokens", None, 1, 1 << 30)
    p.max_tokens = mt if mt is not None else _int(body, "max_tokens", None, 1, 1 << 30)
    p.temperature = _num(body, "temperature", 1.0, 0.0, 2.0)
    p.top_p = _num(body, "top_p", 1.0, 0.0, 1.0) or 1.0
    p.top_k = _int(body, "top_k", 0, 0, 1 << 30) or 0
    p.min_p = _num(body, "min_p", 0.0, 0.0, 1.0)
    p.seed = _int(body, "seed", None, -(1 << 63), (1 << 64) - 1)
    if p.seed is not None:
        p.seed %= 1 << 63  # numpy's generator takes non-negative seeds
    p.presence_penalty = _num(body, "presence_penalty", 0.0, -2.0, 2.0)
    p.frequency_penalty = _num(body, "frequency_penalty", 0.0, -2.0, 2.0)
    p.repeat_penalty = _num(body, "repeat_penalty", 1.0, 1e-6, 1e6)
    stop = body.get("stop")
    if isinstance(stop, str):
        p.stop = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= 16:
        p.stop = [s for s in stop if s]
    elif stop is not None:
        raise bad("'stop' must be a string or a list of up to 16 strings", "stop")
    bias = body.get("logit_bias") or {}
    if not isinstance(bias, dict):
        raise bad("'logit_bias' must be an object mapping token ids to numbers", "logit_bias")
    for k, v in bias.items():
        try:
            tok = int(k)
        except (TypeError, ValueError):
            raise bad(f"logit_bias key {k!r:.20} is not a token id", "logit_bias") from None
        if isinstance(v, bool) or not isinstance(v, int | float) or not -100 <= v <= 100:
            raise bad(f"logit_bias[{k}] must be a number in [-100, 100]", "logit_bias")
        p.logit_bias[tok] = float(v)
    if chat:
        lp = body.get("logprobs")
        if lp is not None and not isinstance(lp, bool):
            raise bad("'logprobs' must be a boolean", "logprobs")
        p.logprobs = bool(lp)
        p.top_logprobs = _int(body, "top_logprobs", 0, 0, 20) or 0
        if p.top_logprobs and not p.logprobs:
            raise bad("'top_logprobs' needs 'logprobs': true", "top_logprobs")
    else:  # legacy completions: logprobs is the number of alternatives (0..5)
        n_lp = _int(body, "logprobs", None, 0, 5)
        p.logprobs = n_lp is not None
        p.top_logprobs = n_lp or 0
    p.n = _int(body, "n", 1, 1, 16) or 1
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("'stream' must be a boolean", "stream")
    p.stream = stream
    so = body.get("stream_options")
    if so is not None:
        if not isinstance(so, dict):
            raise bad("'stream_options' must be an object", "stream_options")
        p.include_usage = bool(so.get("include_usage", False))
    return p


def _text_of(content: Any, i: int) -> str:
    """A message's content as text: a string, null, or a list of {"type": "text"} parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise bad(f"messages[{i}].content: only text parts are supported", "messages")
            out.append(str(part.get("text", "")))
        return "".join(out)
    raise bad(f"messages[{i}].content must be a string or a list of parts", "messages")


def parse_chat(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise bad("'messages' must be a non-empty list", "messages")
    messages = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise bad(f"messages[{i}] must be an object with a 'role'", "messages")
        msg = dict(m)
        msg["content"] = _text_of(m.get("content"), i)
        messages.append(msg)
    rf = body.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
            raise bad(
                "'response_format.type' must be 'text', 'json_object' or 'json_schema'",
                "response_format",
            )
        if rf["type"] == "json_schema":
            js = rf.get("json_schema")
            if not isinstance(js, dict) or not isinstance(js.get("schema", {}), dict):
                raise bad(
                    "'response_format.json_schema.schema' must be an object", "response_format"
                )
        if rf["type"] == "text":
            rf = None
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(
        isinstance(t, dict)
        and t.get("type") == "function"
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
        for t in tools
    ):
        raise bad("'tools' must be a list of {type: 'function', function: {name, ...}}", "tools")
    choice = body.get("tool_choice", "auto" if tools else "none")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if choice.get("type") != "function" or name not in {t["function"]["name"] for t in tools}:
            raise bad("'tool_choice' names no function in 'tools'", "tool_choice")
    elif choice not in ("auto", "none", "required"):
        raise bad("'tool_choice' must be 'auto', 'none', 'required' or a function", "tool_choice")
    if choice == "required" and not tools:
        raise bad("'tool_choice': 'required' needs 'tools'", "tool_choice")
    return ChatRequest(messages, _gen_params(body, chat=True), rf, tools, choice)


def parse_completion(body: Any) -> CompletionRequest:
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    prompt = body.get("prompt")
    prompts: list[str | list[int]]
    if isinstance(prompt, str):
        prompts = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompts = [list(prompt)]
    elif isinstance(prompt, list) and prompt and all(isinstance(s, str) for s in prompt):
        prompts = list(prompt)
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(s, list) and all(isinstance(t, int) for t in s) for s in prompt)
    ):
        prompts = [list(s) for s in prompt]
    else:
        raise bad("'prompt' must be a string, a list of strings or token id lists", "prompt")
    echo = body.get("echo", False)
    if echo:
        raise bad("'echo' is not supported", "echo")
    return CompletionRequest(prompts, _gen_params(body, chat=False))
