"""POST /v1/chat/completions and /v1/completions: OpenAI's response and chunk bodies."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from onnxexec.llm.chat import ChatTemplateError
from onnxexec.serve.generation import Choice, Run, logprob_entry
from onnxexec.serve.openai_schema import APIError, parse_chat, parse_completion
from onnxexec.serve.tool_stream import ToolCallStream
from onnxexec.serve.tools import forced_call_schema, parse_tool_calls

if TYPE_CHECKING:
    from onnxexec.serve.grammar import Matcher
    from onnxexec.serve.state import ServerState


def sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _matcher_factory(st: ServerState, req: Any) -> Callable[[], Matcher | None]:
    """A new grammar matcher per choice when the output is constrained, else None."""
    schema: dict[str, Any] | None
    rf = req.response_format
    forced = req.tools and (req.tool_choice == "required" or isinstance(req.tool_choice, dict))
    if rf is not None:
        js = rf.get("json_schema") or {}
        schema = js.get("schema") if rf["type"] == "json_schema" else None
    elif forced:
        schema = forced_call_schema(req.tools, req.tool_choice)
    else:
        return lambda: None
    factory = await asyncio.to_thread(st.grammar)  # built once, ~0.5 s
    grammar = factory.json_schema(schema)
    factory.matcher(grammar)  # a schema llguidance refuses is a 400 before anything runs
    return lambda: factory.matcher(grammar)


def _tool_message(ch: Choice, tools: list[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    content, calls = parse_tool_calls(ch.text, tools)
    if not calls:
        return {"role": "assistant", "content": ch.text}, ch.finish
    return {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [c.as_openai() for c in calls],
    }, "tool_calls"


async def chat_completions(st: ServerState, request: Request, body: Any) -> Any:
    req = parse_chat(body)
    st.check_ready()
    try:
        prompt = st.chat_prompt(req)
    except ChatTemplateError as e:
        raise APIError(400, str(e), param="messages") from None
    matcher = await _matcher_factory(st, req)
    run = Run(st, prompt, req.params)
    run.start(matcher)
    tools = req.tools if req.tool_choice != "none" else []
    tok_bytes = st.tok.token_to_piece
    cid, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())
    head = {"id": cid, "created": created, "model": st.model_id, "system_fingerprint": None}
    p = req.params

    def lp_of(ch: Choice, lps: list[Any]) -> dict[str, Any] | None:
        return {"content": [logprob_entry(tok_bytes, x) for x in lps]} if p.logprobs else None

    if not p.stream:
        async for _ in run.events(request.is_disconnected):
            pass
        choices = []
        for ch in run.choices:
            msg, finish = (
                _tool_message(ch, tools)
                if tools
                else ({"role": "assistant", "content": ch.text}, ch.finish)
            )
            lps = ch.sampler.logprobs[: ch.n_tokens]
            choices.append(
                {
                    "index": ch.index,
                    "message": msg,
                    "finish_reason": finish,
                    "logprobs": lp_of(ch, lps),
                }
            )
        return JSONResponse(
            {**head, "object": "chat.completion", "choices": choices, "usage": run.usage()}
        )

    def chunk(
        index: int,
        delta: dict[str, Any],
        finish: str | None = None,
        logprobs: dict[str, Any] | None = None,
    ) -> str:
        c = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        extra = {"usage": None} if p.include_usage else {}
        return sse({**head, "object": "chat.completion.chunk", "choices": [c], **extra})

    async def stream() -> AsyncIterator[str]:
        sent: set[int] = set()
        # with tools each choice's text goes through a ToolCallStream: content and
        # delta.tool_calls chunks as the model writes them (serve/tool_stream.py)
        calls = {ch.index: ToolCallStream.for_tools(tools) for ch in run.choices}
        held: dict[int, list[Any]] = {ch.index: [] for ch in run.choices}  # logprobs to send
        try:
            for ch in run.choices:
                yield chunk(ch.index, {"role": "assistant", "content": ""})
            async for ch, delta in run.events(request.is_disconnected):
                lps = held[ch.index]
                lps += ch.new_logprobs() if p.logprobs else []
                ending = ch.finish is not None and ch.index not in sent
                if tools:
                    ts = calls[ch.index]
                    deltas = ts.push(delta) if delta else []
                    if ending:
                        deltas += ts.finish()
                else:
                    deltas = [{"content": delta}] if delta or lps else []
                for d in deltas:
                    yield chunk(ch.index, d, logprobs=lp_of(ch, lps))
                    lps.clear()
                if ending:
                    sent.add(ch.index)
                    finish = "tool_calls" if tools and calls[ch.index].n_calls else ch.finish
                    yield chunk(ch.index, {}, finish, logprobs=lp_of(ch, lps) if lps else None)
                    lps.clear()
            if p.include_usage:
                yield sse(
                    {**head, "object": "chat.completion.chunk", "choices": [], "usage": run.usage()}
                )
        except APIError as e:
            yield sse(e.body())
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


def _legacy_logprobs(st: ServerState, ch: Choice) -> dict[str, Any]:
    """The completions API's logprobs: tokens, token_logprobs, top_logprobs, text_offset."""
    lps = ch.sampler.logprobs[: ch.n_tokens]
    texts = [st.tok.token_to_piece(x.token).decode("utf-8", "replace") for x in lps]
    offsets, off = [], 0
    for t in texts:
        offsets.append(off)
        off += len(t)
    return {
        "tokens": texts,
        "token_logprobs": [x.logprob for x in lps],
        "top_logprobs": [
            {st.tok.token_to_piece(t).decode("utf-8", "replace"): v for t, v in x.top} for x in lps
        ],
        "text_offset": offsets,
    }


async def completions(st: ServerState, request: Request, body: Any) -> Any:
    req = parse_completion(body)
    st.check_ready()
    p = req.params
    if p.stream and len(req.prompts) > 1:
        raise APIError(400, "streaming takes one prompt", param="prompt")
    cid, created = "cmpl-" + uuid.uuid4().hex, int(time.time())
    head = {"id": cid, "created": created, "model": st.model_id, "system_fingerprint": None}
    runs = []
    for prompt in req.prompts:
        run = Run(st, st.text_prompt(prompt), p)
        run.start(lambda: None)
        runs.append(run)

    if not p.stream:
        choices = []
        try:
            for k, run in enumerate(runs):
                async for _ in run.events(request.is_disconnected):
                    pass
                for ch in run.choices:
                    choices.append(
                        {
                            "index": k * p.n + ch.index,
                            "text": ch.text,
                            "finish_reason": ch.finish,
                            "logprobs": _legacy_logprobs(st, ch) if p.logprobs else None,
                        }
                    )
        finally:
            for run in runs:
                run.cancel()
        usage = runs[0].usage()
        for run in runs[1:]:
            u = run.usage()
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                usage[key] += u[key]
        return JSONResponse(
            {**head, "object": "text_completion", "choices": choices, "usage": usage}
        )

    run = runs[0]

    async def stream() -> AsyncIterator[str]:
        sent: set[int] = set()
        try:
            async for ch, delta in run.events(request.is_disconnected):
                finish = ch.finish if ch.finish is not None and ch.index not in sent else None
                if finish is not None:
                    sent.add(ch.index)
                if delta or finish is not None:
                    c = {
                        "index": ch.index,
                        "text": delta,
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                    yield sse({**head, "object": "text_completion", "choices": [c]})
            if p.include_usage:
                yield sse(
                    {**head, "object": "text_completion", "choices": [], "usage": run.usage()}
                )
        except APIError as e:
            yield sse(e.body())
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )
