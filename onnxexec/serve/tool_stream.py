"""Tool calls streamed as the model writes them: OpenAI's `delta.tool_calls` chunks.

OpenAI's streaming API sends a call as chunks of `choices[i].delta.tool_calls`: first
`{index, id, type: "function", function: {name, arguments: ""}}`, then
`{index, function: {arguments: <fragment>}}` pieces whose concatenation is the
arguments' JSON text (the openai client's ChatCompletionStreamState accumulates them).
`ToolCallStream` turns the decoded text of one choice into those deltas while it
arrives, for the formats serve/tools.py parses:

- Hermes / Qwen: content, then `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
  blocks (text after the first block is not content, as in `parse_tool_calls`);
- Llama 3: the whole reply is one `{"name": ..., "parameters": {...}}` object.

A call's header is sent once its name is complete and names a tool; its arguments are
the raw text of the "arguments" / "parameters" value, sent as it grows (a string value
is sent decoded once complete). Content before a call is sent as it comes, holding back
any tail that may begin `<tool_call>` and trailing whitespace (the blocking reply strips
the content before a call). The same text in any chunking gives the same deltas'
concatenation (tests/unit/serve/test_tool_stream.py).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

OPEN = "<tool_call>"
_ARG_KEYS = ("arguments", "parameters")
_WS = " \t\r\n"


@dataclass
class _Field:
    start: int  # index of the value's first char
    end: int | None  # index after its last char; None while incomplete


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _string_end(text: str, i: int) -> int | None:
    """Index after the JSON string starting at text[i] == '"', None if not closed yet."""
    i += 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    return None


def _value_end(text: str, i: int) -> int | None:
    """Index after the JSON value starting at text[i]; None while it may still grow."""
    c = text[i]
    if c == '"':
        return _string_end(text, i)
    if c in "{[":
        depth = 0
        while i < len(text):
            c = text[i]
            if c == '"':
                e = _string_end(text, i)
                if e is None:
                    return None
                i = e
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return None
    while i < len(text) and text[i] not in _WS + ",}]":  # number, true, false, null
        i += 1
    return i if i < len(text) else None


def scan_object(text: str, start: int) -> tuple[dict[str, _Field], int | None, bool]:
    """The top-level members of the JSON object at text[start] == '{' seen so far:
    (key -> value span, index after the closing brace or None, well-formed so far)."""
    fields: dict[str, _Field] = {}
    i = _skip_ws(text, start + 1)
    while i < len(text):
        if text[i] == "}":
            return fields, i + 1, True
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
            continue
        if text[i] != '"':
            return fields, None, False
        ke = _string_end(text, i)
        if ke is None:
            return fields, None, True
        try:
            key = json.loads(text[i:ke])
        except json.JSONDecodeError:
            return fields, None, False
        i = _skip_ws(text, ke)
        if i >= len(text):
            return fields, None, True
        if text[i] != ":":
            return fields, None, False
        i = _skip_ws(text, i + 1)
        if i >= len(text):
            return fields, None, True
        ve = _value_end(text, i)
        fields[key] = _Field(i, ve)
        if ve is None:
            return fields, None, True
        i = _skip_ws(text, ve)
    return fields, None, True


def raw_arguments(text: str, fields: dict[str, _Field], upto: int | None = None) -> str | None:
    """The arguments' text: the raw JSON of an object / array value (up to `upto` while
    incomplete), a string value decoded once complete; None when there is none yet."""
    f = next((fields[k] for k in _ARG_KEYS if k in fields), None)
    if f is None:
        return None
    if text[f.start] in "{[":
        return text[f.start : f.end if f.end is not None else upto]
    if f.end is None:
        return None
    v = json.loads(text[f.start : f.end])
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _name(text: str, fields: dict[str, _Field]) -> str | None:
    f = fields.get("name")
    if f is None or f.end is None or text[f.start] != '"':
        return None
    v = json.loads(text[f.start : f.end])
    return v if isinstance(v, str) else None


@dataclass
class _Call:
    start: int  # index of the object's '{' in the text
    index: int = -1  # OpenAI's tool_calls index once the header is sent
    sent: int = 0  # arguments chars sent


@dataclass
class ToolCallStream:
    """Deltas for one choice: `push(text)` per piece of decoded text, `finish()` at its end.
    Each returns a list of OpenAI delta dicts ({"content"} or {"tool_calls"})."""

    names: set[str]
    text: str = ""
    mode: str = "undecided"  # "content", "hermes" (after OPEN), "json" (Llama 3)
    sent_content: int = 0  # chars of text up to which content was decided
    n_calls: int = 0
    _call: _Call | None = None
    _scan: int = 0  # where to look for the next OPEN in hermes mode
    _out: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def for_tools(cls, tools: list[dict[str, Any]]) -> ToolCallStream:
        return cls({t["function"]["name"] for t in tools})

    def push(self, piece: str) -> list[dict[str, Any]]:
        self.text += piece
        self._advance(final=False)
        return self._take()

    def finish(self) -> list[dict[str, Any]]:
        self._advance(final=True)
        if self.n_calls == 0:  # no call after all: everything not yet sent is content
            self._content(len(self.text), final=True)
        return self._take()

    def _take(self) -> list[dict[str, Any]]:
        out, self._out = self._out, []
        return out

    def _content(self, upto: int, final: bool) -> None:
        """Send text[sent_content:upto] as content; trailing whitespace waits unless final.
        Leading whitespace of the reply is not sent (the blocking reply strips it)."""
        piece = self.text[self.sent_content : upto]
        if not final:
            piece = piece.rstrip(_WS)
        if self.sent_content == 0:
            lead = len(piece) - len(piece.lstrip(_WS))
            self.sent_content += lead
            piece = piece[lead:]
        if piece:
            self._out.append({"content": piece})
            self.sent_content += len(piece)

    def _advance(self, final: bool) -> None:
        t = self.text
        if self.mode == "undecided":
            i = _skip_ws(t, 0)
            rest = t[i:]
            if not rest:
                return
            if rest[0] == "{":
                self.mode, self._call = "json", _Call(i)
            elif rest.startswith(OPEN):
                self.mode, self._scan = "hermes", i
            elif OPEN.startswith(rest) and not final:
                return
            else:
                self.mode = "content"
        if self.mode == "content":
            at = t.find(OPEN, self.sent_content)
            if at < 0:
                keep = next((n for n in range(len(OPEN) - 1, 0, -1) if t.endswith(OPEN[:n])), 0)
                self._content(len(t) - (0 if final else keep), final)
                return
            self._content(at, final=False)
            self.mode, self._scan = "hermes", at
        if self.mode == "json":
            self._json_call(final)
        elif self.mode == "hermes":
            self._hermes(final)

    def _json_call(self, final: bool) -> None:
        """Llama 3: the reply is one call object; a name that is no tool makes it content."""
        call = self._call
        assert call is not None
        fields, end, ok = scan_object(self.text, call.start)
        name = _name(self.text, fields)
        if call.index < 0 and (not ok or (name is not None and name not in self.names)):
            self.mode, self._call = "content", None
            self._advance(final)
            return
        self._emit(call, fields, name, end)

    def _hermes(self, final: bool) -> None:
        t = self.text
        while True:
            call = self._call
            if call is None:
                at = t.find(OPEN, self._scan)
                if at < 0:
                    return
                i = _skip_ws(t, at + len(OPEN))
                if i >= len(t):
                    return
                if t[i] != "{":  # not a call object: look for the next block
                    self._scan = i
                    continue
                call = self._call = _Call(i)
            fields, end, ok = scan_object(t, call.start)
            name = _name(t, fields)
            if ok and (name is None or name in self.names):
                self._emit(call, fields, name, end)
            if end is None and ok:
                return
            self._call, self._scan = None, end if end is not None else call.start + 1

    def _emit(
        self, call: _Call, fields: dict[str, _Field], name: str | None, end: int | None
    ) -> None:
        if name is None or name not in self.names:
            return
        if call.index < 0:
            call.index, self.n_calls = self.n_calls, self.n_calls + 1
            self._out.append(
                {
                    "tool_calls": [
                        {
                            "index": call.index,
                            "id": "call_" + uuid.uuid4().hex[:24],
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        args = raw_arguments(self.text, fields, len(self.text))
        if args is None and end is not None:
            args = "{}"  # a call without arguments (as parse_tool_calls gives it)
        if args is not None and len(args) > call.sent:
            frag = args[call.sent :]
            call.sent = len(args)
            self._out.append(
                {"tool_calls": [{"index": call.index, "function": {"arguments": frag}}]}
            )
