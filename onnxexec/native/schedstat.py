"""Whether other processes hold our cores, from the thread's scheduler statistics.

/proc/thread-self/schedstat gives a thread's time on a CPU and time spent runnable but
waiting for one (ns). On a 2-vCPU VM a parallel region waits for its slowest thread, so
both the native pool (parallel.py) and the decode ops (ops/llm_decode.py) stop
handing work to a second thread while the caller waited for a core more than 5% of
the time since its previous sample.
"""

from __future__ import annotations

import threading

_WAIT_SHARE = 20  # contended when waiting > 1/20 of (running + waiting)


class CoreWaits:
    """Samples the calling thread's schedstat; compares each sample with the last."""

    def __init__(self) -> None:
        self._last: tuple[int, int, int] | None = None

    def contended(self) -> bool | None:
        """Whether this thread waited for a core over 5% of the time since its previous
        sample, or None without an answer (no schedstat, or the previous sample was
        another thread's)."""
        try:
            with open("/proc/thread-self/schedstat") as f:
                run, wait = (int(v) for v in f.read().split()[:2])
        except (OSError, ValueError):
            return None
        me = threading.get_ident()
        last, self._last = self._last, (me, run, wait)
        if last is None or last[0] != me:
            return None
        dr, dw = run - last[1], wait - last[2]
        return dw * _WAIT_SHARE > dr + dw
