"""Whether the calling thread has the cores to itself (for the decode ops' threads).

A parallel region on this 2-vCPU VM waits for its slowest thread. While another
process holds a core, each of the ~60 regions of a SmolLM2 token waits for a
descheduled thread: 33-77 ms a token against 12 ms on one thread. So, as
kernels/parallel.py's pool does, the caller reads its thread's scheduler statistics
every ~50 ms and reports contention while it spent over 5% of that time waiting for
a core; the decode ops then run on the calling thread alone.
"""

from __future__ import annotations

import threading
import time

_CHECK_SECONDS = 0.05


class _State:
    next_check = 0.0
    last: tuple[int, int, int] | None = None
    contended = False


def free_cores() -> bool:
    """False while the calling thread waited for a core over 5% of the last ~50 ms."""
    now = time.perf_counter()
    if now < _State.next_check:
        return not _State.contended
    _State.next_check = now + _CHECK_SECONDS
    try:
        with open("/proc/thread-self/schedstat") as f:
            run, wait = (int(v) for v in f.read().split()[:2])
    except (OSError, ValueError):
        return True
    last, _State.last = _State.last, (threading.get_ident(), run, wait)
    if last is not None and last[0] == threading.get_ident():
        dr, dw = run - last[1], wait - last[2]
        _State.contended = dw * 20 > dr + dw
    return not _State.contended
