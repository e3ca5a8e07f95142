"""Tool calls: tools into the prompt, tool calls out of the generated text.

A chat template that mentions `tools` renders them itself (HF apply_chat_template passes
`tools`); for one that does not, a system message in the Hermes format (the format
Qwen2.5's and Hermes' templates write) describes them. Output is parsed back from the
formats templates define: Hermes/Qwen `<tool_call>{"name", "arguments"}</tool_call>`
blocks and Llama 3's bare `{"name", "parameters"}` JSON object. A forced call
(tool_choice "required" or a named function) is constrained to that JSON object.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from onnxexec.serve.tool_stream import raw_arguments, scan_object

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI returns it
    id: str

    def as_openai(self, index: int | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }
        if index is not None:
            d["index"] = index
        return d


def template_supports_tools(template: str | None) -> bool:
    return bool(template) and "tools" in (template or "")


def tools_system_prompt(tools: list[dict[str, Any]]) -> str:
    """The Hermes-format system text listing the tools (Qwen2.5's template wording)."""
    sigs = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{sigs}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def messages_with_tools(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Messages for a template without tool support: the tools prepended to the system
    message; assistant tool calls and tool results written as Hermes text."""
    out: list[dict[str, Any]] = []
    sys_text = tools_system_prompt(tools)
    if messages and messages[0].get("role") == "system":
        out.append({"role": "system", "content": messages[0]["content"] + "\n\n" + sys_text})
        messages = messages[1:]
    else:
        out.append({"role": "system", "content": sys_text})
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = "\n".join(
                "<tool_call>\n"
                + json.dumps(
                    {
                        "name": c["function"]["name"],
                        "arguments": json.loads(c["function"].get("arguments") or "{}"),
                    }
                )
                + "\n</tool_call>"
                for c in m["tool_calls"]
            )
            out.append({"role": "assistant", "content": (m.get("content") or "") + calls})
        elif m.get("role") == "tool":
            text = f"<tool_response>\n{m.get('content', '')}\n</tool_response>"
            out.append({"role": "user", "content": text})
        else:
            out.append(m)
    return out


def forced_call_schema(tools: list[dict[str, Any]], choice: str | dict[str, Any]) -> dict:
    """JSON schema of one call {"name", "arguments"} to the forced tool(s)."""
    if isinstance(choice, dict):
        tools = [t for t in tools if t["function"]["name"] == choice["function"]["name"]]
    variants = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": t["function"].get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _call(obj: Any, body: str, names: set[str]) -> ToolCall | None:
    """The call in `body` (its JSON text, parsed as `obj`); the arguments are their text
    as the model wrote it, as the streamed reply sends them (serve/tool_stream.py)."""
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    start = body.index("{")
    text = raw_arguments(body, scan_object(body, start)[0])
    return ToolCall(obj["name"], "{}" if text is None else text, "call_" + uuid.uuid4().hex[:24])


def parse_tool_calls(text: str, tools: list[dict[str, Any]]) -> tuple[str, list[ToolCall]]:
    """(content left over, tool calls) from generated text; no calls -> (text, [])."""
    names = {t["function"]["name"] for t in tools}
    calls: list[ToolCall] = []
    if "<tool_call>" in text:
        for body in _BLOCK.findall(text):
            try:
                c = _call(json.loads(body), body, names)
            except json.JSONDecodeError:
                c = None
            if c is not None:
                calls.append(c)
        if calls:
            return text[: text.index("<tool_call>")].strip(), calls
        return text, []
    stripped = text.strip()
    if stripped.startswith("{"):  # Llama 3: the whole reply is one JSON call
        try:
            c = _call(json.loads(stripped), stripped, names)
        except json.JSONDecodeError:
            c = None
        if c is not None:
            return "", [c]
    return text, []
