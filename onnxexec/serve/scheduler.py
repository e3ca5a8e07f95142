"""The one thread that drives the batching engine, bridged to the asyncio event loop.

The engine is synchronous and single-threaded (llm/batching.py): this thread calls
`step()` while there is work and hands each Event to the asyncio loop with
`call_soon_threadsafe`, to the queue of the request that asked. Other model work that
must not run beside a step (embeddings share the numba thread pool) is queued here as
jobs and runs between steps.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from onnxexec.llm.batching import BatchEngine, Event, Request

log = logging.getLogger(__name__)
T = TypeVar("T")


class Scheduler:
    """Owns the engine's thread; `submit`/`cancel`/`run` are called from the event loop."""

    def __init__(self, engine: BatchEngine, loop: asyncio.AbstractEventLoop) -> None:
        self.engine = engine
        self.loop = loop
        self._queues: dict[int, asyncio.Queue[Event]] = {}
        self._lock = threading.Lock()  # submit + register vs dispatch of the first event
        self._jobs: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="onnxexec-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    @property
    def in_flight(self) -> int:
        """Requests submitted whose final event has not been handed out yet."""
        return len(self._queues)

    def submit(self, req: Request, queue: asyncio.Queue[Event]) -> int:
        """Submit; the request's events arrive on `queue`, the last one has `finish` set.

        Raises what engine.submit raises (ContextLengthError for a prompt too long)."""
        with self._lock:
            rid = self.engine.submit(req)
            self._queues[rid] = queue
        return rid

    def cancel(self, rid: int) -> None:
        if rid in self._queues:
            self.engine.cancel(rid)

    async def run(self, fn: Callable[[], T]) -> T:
        """Run fn on the scheduler thread between two steps and await its result."""
        fut: Future[T] = Future()
        self._jobs.append((fn, fut))
        return await asyncio.wrap_future(fut)

    def _run(self) -> None:
        while not self._stop.is_set():
            while self._jobs:
                fn, fut = self._jobs.popleft()
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except Exception as e:  # handed to the awaiting request
                        fut.set_exception(e)
            if not self.engine.has_work():
                # short timeout: jobs do not wake the engine's condition variable
                self.engine.wait_for_work(timeout=0.02)
                continue
            try:
                events = self.engine.step()
            except Exception:  # the engine reports per-request errors itself; keep serving
                log.exception("engine step failed")
                continue
            with self._lock:
                for ev in events:
                    q = self._queues.get(ev.request_id)
                    if q is None:
                        continue
                    if ev.finish is not None:
                        del self._queues[ev.request_id]
                    self.loop.call_soon_threadsafe(q.put_nowait, ev)
