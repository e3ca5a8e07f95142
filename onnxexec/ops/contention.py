"""Whether the calling thread has the cores to itself (for the decode ops' threads).

A parallel region on this 2-vCPU VM waits for its slowest thread. While another
process holds a core, each of the ~60 regions of a SmolLM2 token waits for a
descheduled thread: 33-77 ms a token against 12 ms on one thread. So, as
native/parallel.py's pool does, the caller samples its thread's scheduler statistics
(native/schedstat.py) every ~50 ms; while it waited for a core over 5% of that time
the decode ops run on the calling thread alone.
"""

from __future__ import annotations

import time

from onnxexec.native.schedstat import CoreWaits

_CHECK_SECONDS = 0.05


class _State:
    next_check = 0.0
    waits = CoreWaits()
    contended = False


def free_cores() -> bool:
    """False while the calling thread waited for a core over 5% of the last ~50 ms."""
    now = time.perf_counter()
    if now >= _State.next_check:
        _State.next_check = now + _CHECK_SECONDS
        contended = _State.waits.contended()
        if contended is not None:
            _State.contended = contended
    return not _State.contended
