"""Continuous batching: many generation requests on one LLM, one decode pass per step.

Driven by one thread calling `step()` in a loop (`wait_for_work` blocks it while there
is nothing to do); `submit` and `cancel` may be called from any thread. Each request
gets a slot (its own KV cache, llm/slots.py); a step admits waiting requests to free
slots (the slot whose cache shares the longest prompt prefix first), evaluates at most
`chunk` prompt tokens (so a long prompt does not stall the others), then runs one
decode pass over every sequence that is generating. Finished and cancelled requests
leave their slot between steps, new ones join.

At temperature 0 every request's tokens equal `onnxexec.llm.generate`'s for the same
prompt alone (greedy), whatever else is in the batch (see llm/slots.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from onnxexec.errors import ContextLengthError
from onnxexec.llm.slots import DECODED, MIN_ROWS, SlotModel, cut, reusable, row_class

if TYPE_CHECKING:
    from onnxexec.llm.model import LLM


@dataclass
class Request:
    prompt: list[int]  # token ids, already templated + tokenized by the caller
    max_tokens: int
    # logits (V,) float32 (a private copy it may modify) -> next token id; called once a token
    sampler: Callable[[np.ndarray], int]
    stop_ids: frozenset[int] = frozenset()  # stop tokens besides the model's end-of-generation ids


@dataclass(frozen=True)
class Event:
    """One request's news from a step. A request ends with exactly one event whose
    `finish` is set; an end-of-generation or stop id is not emitted (that event has
    token None, as do "cancelled" and "error" ones)."""

    request_id: int
    token: int | None  # the new token (None only in a final event without a token)
    finish: str | None  # None while running; "stop", "length", "cancelled", "error"
    n_prompt: int  # prompt tokens of the request
    n_cached: int  # prompt tokens reused from a slot's cache (prefix reuse)
    error: str | None = None


@dataclass(frozen=True)
class SlotStats:
    n_past: int  # KV positions in use (a free slot keeps its tokens for prefix reuse)
    n_ctx: int
    request_id: int | None  # the request it serves, None when free


@dataclass(frozen=True)
class EngineStats:
    queued: int
    active: int
    slots: tuple[SlotStats, ...]
    prompt_tokens: int  # prompt tokens evaluated (cached ones not counted)
    cached_tokens: int  # prompt tokens reused from slot caches
    generated_tokens: int
    prefill_s: float
    decode_s: float
    steps: int


@dataclass
class _Seq:
    rid: int
    req: Request
    slot: int = -1
    done: int = 0  # prompt tokens in the cache
    n_cached: int = 0
    generated: int = 0
    pending: int | None = None  # sampled, not yet in the cache


@dataclass
class _Slot:
    tokens: list[int] = field(default_factory=list)
    classes: list[tuple[bool, bool, bool]] = field(default_factory=list)
    seq: _Seq | None = None


class BatchEngine:
    """Serve Requests on `slots` KV caches of n_ctx positions each (default llm.n_ctx),
    the weights shared; at most `chunk` prompt tokens are evaluated per step."""

    def __init__(self, llm: LLM, slots: int, *, n_ctx: int | None = None, chunk: int = 256) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be a positive integer, got {slots!r}")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
        n = llm.n_ctx if n_ctx is None else n_ctx
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= llm.config.n_ctx_train:
            raise ValueError(
                f"n_ctx must be an integer in (0, {llm.config.n_ctx_train}] (the model's "
                f"context_length), got {n!r}"
            )
        self.llm = llm
        self.n_ctx = n
        self.chunk = chunk
        self.model = SlotModel(llm, slots, n)
        self._slots = [_Slot() for _ in range(slots)]
        self._queue: deque[_Seq] = deque()
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._next_id = 0
        self._eog = frozenset(llm.tokenizer.vocab.eog_ids)
        self._totals = dict(prompt=0, cached=0, generated=0, prefill=0.0, decode=0.0, steps=0)

    # -- called from any thread
    def submit(self, req: Request) -> int:
        """Queue a request; its id. ContextLengthError when the prompt does not fit a slot."""
        n_vocab = self.llm.config.n_vocab
        if not req.prompt:
            raise ValueError("the prompt has no tokens")
        if len(req.prompt) > self.n_ctx:
            raise ContextLengthError(
                f"the prompt has {len(req.prompt)} tokens, more than the context of "
                f"{self.n_ctx} tokens per slot"
            )
        bad = [t for t in req.prompt if not 0 <= t < n_vocab]
        if bad:
            raise ValueError(f"prompt token {bad[0]} is not an id in [0, {n_vocab})")
        if req.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {req.max_tokens}")
        with self._wake:
            rid = self._next_id
            self._next_id += 1
            self._queue.append(_Seq(rid, req))
            self._wake.notify_all()
        return rid

    def cancel(self, request_id: int) -> None:
        """End the request at the next step (a "cancelled" event); unknown ids are ignored."""
        with self._wake:
            self._cancelled.add(request_id)
            self._wake.notify_all()

    def has_work(self) -> bool:
        with self._lock:
            return bool(self._queue or self._cancelled) or any(s.seq for s in self._slots)

    def wait_for_work(self, timeout: float | None = None) -> bool:
        """Block until there is work (True) or the timeout passes (False)."""
        with self._wake:
            return self._wake.wait_for(
                lambda: bool(self._queue or self._cancelled) or any(s.seq for s in self._slots),
                timeout,
            )

    @property
    def stats(self) -> EngineStats:
        with self._lock:
            t = self._totals
            return EngineStats(
                queued=len(self._queue),
                active=sum(s.seq is not None for s in self._slots),
                slots=tuple(
                    SlotStats(len(s.tokens), self.n_ctx, s.seq.rid if s.seq else None)
                    for s in self._slots
                ),
                prompt_tokens=int(t["prompt"]),
                cached_tokens=int(t["cached"]),
                generated_tokens=int(t["generated"]),
                prefill_s=float(t["prefill"]),
                decode_s=float(t["decode"]),
                steps=int(t["steps"]),
            )

    # -- the scheduler thread
    def step(self) -> list[Event]:
        """Cancel, admit, prefill at most `chunk` prompt tokens, one decode pass."""
        events: list[Event] = []
        with self._lock:
            self._drop_cancelled(events)
            self._admit()
        self._prefill(events)
        self._decode(events)
        with self._lock:
            self._totals["steps"] += 1
        return events

    def _drop_cancelled(self, events: list[Event]) -> None:
        if not self._cancelled:
            return
        for seq in [q for q in self._queue if q.rid in self._cancelled]:
            self._queue.remove(seq)
            events.append(self._final(seq, None, "cancelled"))
        for s in self._slots:
            if s.seq is not None and s.seq.rid in self._cancelled:
                events.append(self._final(s.seq, None, "cancelled"))
                s.seq = None
        self._cancelled.clear()

    def _admit(self) -> None:
        n_batch = self.llm.n_batch
        while self._queue:
            free = [i for i, s in enumerate(self._slots) if s.seq is None]
            if not free:
                return
            seq = self._queue.popleft()
            prompt = seq.req.prompt
            reuse = [
                reusable(self._slots[i].tokens, self._slots[i].classes, prompt, n_batch)
                for i in free
            ]
            # the longest shared prefix; among equals the least filled cache (keeps others)
            best = max(
                range(len(free)), key=lambda j: (reuse[j], -len(self._slots[free[j]].tokens))
            )
            slot = self._slots[free[best]]
            n = reuse[best]
            del slot.tokens[n:], slot.classes[n:]
            slot.seq = seq
            seq.slot, seq.done, seq.n_cached = free[best], n, n
            self._totals["cached"] += n

    def _prefill(self, events: list[Event]) -> None:
        budget = self.chunk
        first = True
        n_batch = self.llm.n_batch
        waiting = [s for s in self._slots if s.seq and s.seq.done < len(s.seq.req.prompt)]
        for slot in sorted(waiting, key=lambda s: s.seq.rid):  # in order of submission
            seq = slot.seq
            prompt = seq.req.prompt
            take = cut(
                seq.done, len(prompt), n_batch, max(budget, 2 * MIN_ROWS) if first else budget
            )
            first = False
            if take == 0:
                break
            start, end = seq.done, seq.done + take
            t0 = time.perf_counter()
            try:
                logits = self.model.prefill(seq.slot, prompt[start:end], start)
            except Exception as e:  # the model failed on this prompt: end it, keep serving
                self._fail(slot, events, e)
                continue
            finally:
                self._totals["prefill"] += time.perf_counter() - t0
            slot.tokens.extend(prompt[start:end])
            slot.classes.extend(row_class(r, start, end) for r in range(start, end))
            seq.done = end
            self._totals["prompt"] += take
            budget -= take
            if end == len(prompt):
                self._sample(slot, logits, events)
            if budget <= 0:
                break

    def _decode(self, events: list[Event]) -> None:
        live = [s for s in self._slots if s.seq is not None and s.seq.pending is not None]
        if not live:
            return
        t0 = time.perf_counter()
        try:
            logits = self.model.decode(
                [s.seq.slot for s in live],
                [s.seq.pending for s in live],
                [len(s.tokens) for s in live],
            )
        except Exception as e:
            for s in live:
                self._fail(s, events, e)
            return
        finally:
            self._totals["decode"] += time.perf_counter() - t0
        for s, row in zip(live, logits, strict=True):
            s.tokens.append(s.seq.pending)
            s.classes.append(DECODED)
            s.seq.pending = None
            self._sample(s, row, events)

    def _sample(self, slot: _Slot, logits: np.ndarray, events: list[Event]) -> None:
        """Pick the next token from the logits after the slot's last cached token, as
        generation.stream does: max_tokens, then EOG / stop ids, then the context end."""
        seq = slot.seq
        if seq.generated >= seq.req.max_tokens:
            return self._finish(slot, events, None, "length")
        try:
            t = int(seq.req.sampler(np.array(logits, np.float32)))
        except Exception as e:
            return self._fail(slot, events, e)
        if t in self._eog or t in seq.req.stop_ids:
            return self._finish(slot, events, None, "stop")
        seq.generated += 1
        self._totals["generated"] += 1
        if seq.generated >= seq.req.max_tokens or len(slot.tokens) >= self.n_ctx:
            return self._finish(slot, events, t, "length")
        seq.pending = t
        events.append(Event(seq.rid, t, None, len(seq.req.prompt), seq.n_cached))
        return None

    def _final(self, seq: _Seq, token: int | None, finish: str, error: str | None = None) -> Event:
        return Event(seq.rid, token, finish, len(seq.req.prompt), seq.n_cached, error)

    def _finish(self, slot: _Slot, events: list[Event], token: int | None, finish: str) -> None:
        events.append(self._final(slot.seq, token, finish))
        with self._lock:
            slot.seq = None

    def _fail(self, slot: _Slot, events: list[Event], e: Exception) -> None:
        events.append(self._final(slot.seq, None, "error", f"{type(e).__name__}: {e}"))
        with self._lock:
            # the cache rows written by the failed evaluation are unknown: forget them
            slot.seq, slot.tokens, slot.classes = None, [], []
