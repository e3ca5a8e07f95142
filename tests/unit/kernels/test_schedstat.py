"""native/schedstat.py: the core-wait sampler shared by the pool and the decode ops."""

from __future__ import annotations

import os
import threading

import pytest

from onnxexec.native.schedstat import CoreWaits

needs_schedstat = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="no /proc schedstat here"
)


@needs_schedstat
def test_answers_from_the_second_sample_of_one_thread() -> None:
    waits = CoreWaits()
    assert waits.contended() is None  # nothing to compare with yet
    sum(range(200_000))  # run a little so the counters move
    assert isinstance(waits.contended(), bool)


@needs_schedstat
def test_a_sample_from_another_thread_gives_no_answer() -> None:
    waits = CoreWaits()
    waits.contended()
    seen: list[bool | None] = []
    t = threading.Thread(target=lambda: seen.append(waits.contended()))
    t.start()
    t.join()
    assert seen == [None]


def test_no_schedstat_gives_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_proc(*_a: object, **_k: object) -> None:
        raise OSError("no /proc")

    monkeypatch.setattr("builtins.open", no_proc)
    assert CoreWaits().contended() is None
