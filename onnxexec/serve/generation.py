"""Running one API request's choices on the engine: text assembly, stops, logprobs.

Each choice is one engine Request with its own sampler. Events come back on one
asyncio queue; text is decoded incrementally (StreamDecoder keeps UTF-8 whole), stop
strings are searched in the decoded text (the tail that could still begin a stop string
is held back, as llama-server does) and a hit cancels the engine request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from onnxexec.errors import OnnxExecError
from onnxexec.llm.tokenizer import StreamDecoder
from onnxexec.serve.openai_schema import APIError, GenParams
from onnxexec.serve.sampling import RequestSampler, TokenLogprob, sampling_params

if TYPE_CHECKING:
    from onnxexec.llm.batching import Event
    from onnxexec.serve.grammar import Matcher
    from onnxexec.serve.state import ServerState


def held_back(text: str, stops: list[str]) -> int:
    """How many trailing chars of `text` could still be the start of a stop string."""
    keep = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:n]):
                keep = max(keep, n)
                break
    return keep


@dataclass
class Choice:
    index: int
    sampler: RequestSampler
    decoder: StreamDecoder
    stops: list[str]
    rid: int = -1
    pending: str = ""
    text: str = ""
    n_tokens: int = 0
    n_logprobs_sent: int = 0
    finish: str | None = None
    n_cached: int = 0
    error: str | None = None

    def feed(self, ev: Event) -> str:
        """Apply one event; returns the text that is now final (may be "")."""
        out = ""
        if ev.token is not None and self.finish is None:
            self.n_tokens += 1
            self.pending += self.decoder.push(ev.token)
            hits = [i for i in (self.pending.find(s) for s in self.stops) if i >= 0]
            if hits:
                out, self.pending = self.pending[: min(hits)], ""
                self.finish = "stop"
            else:
                keep = held_back(self.pending, self.stops)
                cut = len(self.pending) - keep
                out, self.pending = self.pending[:cut], self.pending[cut:]
        if ev.finish is not None and self.finish is None:
            self.n_cached = ev.n_cached
            out += self.pending + self.decoder.flush()
            self.pending = ""
            if ev.finish == "error":
                self.error = ev.error or "generation failed"
            self.finish = "length" if ev.finish == "length" else "stop"
        self.text += out
        return out

    def new_logprobs(self) -> list[TokenLogprob]:
        """Logprobs of the tokens received since the last call."""
        lps = self.sampler.logprobs[self.n_logprobs_sent : self.n_tokens]
        self.n_logprobs_sent += len(lps)
        return lps


@dataclass
class Run:
    """The choices of one request and the queue their events arrive on."""

    state: ServerState
    prompt: list[int]
    params: GenParams
    choices: list[Choice] = field(default_factory=list)
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    _by_rid: dict[int, Choice] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return all(c.finish is not None and c.rid not in self._by_rid for c in self.choices)

    def start(self, matcher: Callable[[], Matcher | None]) -> None:
        """Submit n engine requests: 429 past the queue limit, 400 past the context."""
        from onnxexec.llm.batching import Request

        st, p = self.state, self.params
        cfg = st.config
        if st.scheduler.in_flight + p.n > cfg.parallel + cfg.queue:
            raise APIError(
                429,
                f"server busy: {cfg.parallel} slots and {cfg.queue} queued requests in use",
                type_="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(cfg.retry_after_s)},
            )
        if len(self.prompt) >= st.n_ctx:
            raise APIError(
                400,
                f"the prompt has {len(self.prompt)} tokens; the context per slot is "
                f"{st.n_ctx} tokens (--ctx), which must leave room for one generated token",
                param="messages",
                code="context_length_exceeded",
            )
        room = st.n_ctx - len(self.prompt)
        max_tokens = min(p.max_tokens or room, room)
        n_vocab = st.tok.vocab_size
        for i in range(p.n):
            sampler = RequestSampler(
                sampling_params(p, n_vocab, seed_offset=i),
                self.prompt,
                matcher=matcher(),
                logprobs=p.logprobs,
                top_logprobs=p.top_logprobs,
            )
            ch = Choice(i, sampler, StreamDecoder(st.tok), p.stop)
            self.choices.append(ch)
            try:
                ch.rid = st.scheduler.submit(Request(self.prompt, max_tokens, sampler), self.queue)
            except OnnxExecError as e:
                self.cancel()
                raise APIError(400, str(e), code="context_length_exceeded") from None
            self._by_rid[ch.rid] = ch

    def cancel(self) -> None:
        for rid in list(self._by_rid):
            self.state.scheduler.cancel(rid)

    async def events(self, disconnected: Callable[[], Any]) -> AsyncIterator[tuple[Choice, str]]:
        """(choice, new final text) per event until every choice has finished; cancels the
        engine requests when the client goes away or the consumer stops early."""
        try:
            while self._by_rid:
                try:
                    ev = await asyncio.wait_for(self.queue.get(), timeout=0.5)
                except asyncio.TimeoutError:
                    if await disconnected():
                        return
                    continue
                ch = self._by_rid.get(ev.request_id)
                if ch is None:
                    continue
                was_done = ch.finish is not None
                delta = ch.feed(ev)
                if ev.finish is not None:
                    del self._by_rid[ev.request_id]
                elif ch.finish is not None and not was_done:
                    self.state.scheduler.cancel(ch.rid)  # a stop string ended it
                if ch.error:
                    raise APIError(500, f"generation failed: {ch.error}", type_="server_error")
                yield ch, delta
        finally:
            self.cancel()

    def usage(self) -> dict[str, Any]:
        gen = sum(c.n_tokens for c in self.choices)
        cached = max((c.n_cached for c in self.choices), default=0)
        return {
            "prompt_tokens": len(self.prompt),
            "completion_tokens": gen,
            "total_tokens": len(self.prompt) + gen,
            "prompt_tokens_details": {"cached_tokens": cached},
        }


def logprob_entry(tok_text: Callable[[int], bytes], lp: TokenLogprob) -> dict[str, Any]:
    """One chat logprobs.content item (OpenAI ChatCompletionTokenLogprob)."""

    def one(t: int, v: float) -> dict[str, Any]:
        b = tok_text(t)
        return {"token": b.decode("utf-8", "replace"), "logprob": v, "bytes": list(b)}

    d = one(lp.token, lp.logprob)
    d["top_logprobs"] = [one(t, v) for t, v in lp.top]
    return d
