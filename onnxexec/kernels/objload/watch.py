"""Kernels are made ready while a session or LLM is created; a later load or compile is
counted, and a compile is said on stderr.

Creation warms every path its runs can take (llm/model.py's `LLM.warmup`), inside
`creating(...)`. Outside creation, after one has finished, a numba compile means a run
took a path the warm-up did not: it is logged once per kernel as a warning (one line:
which kernel, for which argument types, why), the issue's "if a lazy compile happens
anyway, one line on stderr says what and why" (logging's last-resort handler prints
warnings to stderr when the application configured none).

`ready_overloads()` is the count tests compare before and after runs: every overload
linked from a record (objload) plus every overload numba's dispatchers hold (compiled
or loaded from numba's cache). A run that adds one loaded or compiled something after
creation.

Compiles are seen through numba's event API (`numba.core.event.register` for
"numba:compile", numba's documented listener interface), not a patch: the listener is
registered when numba is imported (kernels/__init__.py's import hook).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

log = logging.getLogger("onnxexec.kernels")
_lock = threading.Lock()


class _State:
    creating = 0  # creations in progress (nested or in other threads)
    created = False  # a creation has finished: later compiles are lazy ones
    compiles = 0  # numba compile events seen (any phase)
    lazy_compiles = 0  # of which outside creation, after one
    said: ClassVar[set[str]] = set()  # kernels already warned about
    listening = False
    subscribers: ClassVar[list[Callable[[str], None]]] = []  # told each compile's kernel name


def subscribe(fn: Callable[[str], None]) -> None:
    """Call fn(kernel name) at every compile (`onnxexec warmup` shows its progress)."""
    _State.subscribers.append(fn)


@contextlib.contextmanager
def creating(what: str) -> Iterator[None]:
    """Mark a session / LLM creation: compiles inside are the expected, visible ones."""
    with _lock:
        _State.creating += 1
    try:
        yield
    finally:
        with _lock:
            _State.creating -= 1
            _State.created = True
    log.debug("onnxexec: %s created; %d kernel compiles so far", what, _State.compiles)


def compiles() -> int:
    """numba compiles this process has run (0 while numba is not imported)."""
    return _State.compiles


def lazy_compiles() -> int:
    """numba compiles run outside creation, after a session or LLM was created."""
    return _State.lazy_compiles


def ready_overloads() -> int:
    """Overloads this process has ready: linked from records, or held by numba."""
    return sum(ready_kernels().values())


def ready_kernels() -> dict[str, int]:
    """Kernel name -> overloads ready: objload's linked ones plus those of every numba
    dispatcher an onnxexec module holds (kernel modules that use numba directly too)."""
    import sys

    from onnxexec.kernels import objload

    counts: dict[str, int] = {}
    seen: set[int] = set()
    with objload._lock:
        for k in objload._kernels:
            linked = k.__dict__.get("_by_key")  # LazyKernels only (no __getattr__)
            if linked:
                counts[k._name] = len(linked)
    if "numba" not in sys.modules:
        return counts  # no dispatcher exists yet
    from numba.core.dispatcher import Dispatcher

    with objload._lock:  # numba objects made from placeholders or after numba came in
        made = [k.real for k in objload._kernels] + [entry[1] for entry in objload._late]
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("onnxexec") and mod is not None:
            made += list(vars(mod).values())
    for value in made:
        if not isinstance(value, Dispatcher) or id(value) in seen or not value.overloads:
            continue
        seen.add(id(value))
        fn = value.py_func
        name = f"{fn.__module__}.{fn.__qualname__}"
        counts[name] = counts.get(name, 0) + len(value.overloads)
    return counts


def _types(args: Any) -> str:
    try:
        return ", ".join(str(a) for a in args)
    except TypeError:
        return "?"


def on_compile(name: str, args: Any) -> None:
    """One numba compile of kernel `name` for argument types `args` is starting."""
    with _lock:
        _State.compiles += 1
        lazy = _State.created and not _State.creating
        if lazy:
            _State.lazy_compiles += 1
        first = lazy and name not in _State.said
        if first:
            _State.said.add(name)
    for fn in _State.subscribers:
        fn(name)
    if first:
        log.warning(
            "onnxexec: compiling kernel %s (%s) during a run: creation did not warm this "
            "path; `onnxexec warmup MODEL` stores it for later processes",
            name,
            _types(args),
        )


def listen(numba: Any) -> None:
    """Register the compile listener with numba's event API (once per process)."""
    from numba.core import event

    class _Compiles(event.Listener):  # type: ignore[misc, name-defined]
        def on_start(self, ev: Any) -> None:
            data = ev.data or {}
            disp = data.get("dispatcher")
            fn = getattr(disp, "py_func", None)
            name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', disp)}"
            on_compile(name, data.get("args", ()))

        def on_end(self, ev: Any) -> None:
            pass

    with _lock:
        if _State.listening:
            return
        _State.listening = True
    event.register("numba:compile", _Compiles())
