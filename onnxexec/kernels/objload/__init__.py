"""Run cached numba kernels without importing numba: `njit` for kernel modules that
can be used by numba-free processes.

Importing numba loads llvmlite's LLVM library. On this project's machines that alone
is ~100 MB of resident memory (a 180 MB shared library whose pages the kernel maps in
whole page-cache folios), more than onnxruntime's entire process for a small
scikit-learn model. Yet a process that finds its kernels in numba's cache runs no
compiler: it only links object code. So a kernel decorated with this `njit` is a
`LazyKernel`:

- a call computes the overload key of its arguments (argkey.py) and runs the
  overload linked for that key (~0.15 us an argument, where numba's dispatcher
  takes ~0.05 us);
- the first call of a key reads its record (store.py): numba's object code for that
  overload, linked in-process by elf.py against numba's C helpers (numba_rt.py), and
  called through numba's own CPython wrapper;
- with no usable record, numba itself is imported and takes over (see `_materialize`):
  every LazyKernel becomes the numba dispatcher it stands for, in every onnxexec
  module that holds it, and kernel modules' `nb` becomes numba, so compiles see real
  dispatchers, `nb.prange` and inlining exactly as before. At exit, the overloads
  numba ran are recorded for the next process.

So the first process compiles (or loads numba's cache) and records; later processes of
the same kernels, numba, CPU and Python link the records and never load LLVM. Set
ONNXEXEC_OBJLOAD=0 to always use numba. NUMBA_DISABLE_JIT=1 leaves plain functions.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from onnxexec.kernels.objload.argkey import call_key, has_key, raw_key

log = logging.getLogger(__name__)
_lock = threading.RLock()
_kernels: list[LazyKernel] = []
_thread_hint = 1
_SUBMODULES = frozenset({"argkey", "elf", "numba_rt", "store"})


def enabled() -> bool:
    return os.environ.get("ONNXEXEC_OBJLOAD", "1") != "0"


class LazyKernel:
    """Stands for `numba.njit(**options)(py_func)` until numba is needed."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.options = options
        self.real: Any = None  # the numba dispatcher, once numba is imported
        self._linked: dict[tuple[Any, ...], Any] = {}  # by argkey.raw_key
        self._by_key: dict[tuple[Any, ...], Any] = {}  # by argkey.call_key
        self._name = f"{py_func.__module__}.{py_func.__qualname__}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        real = self.real
        if real is not None:
            return real(*args, **kwargs)
        if kwargs:
            return _materialize(self)(*args, **kwargs)
        raw = raw_key(args)
        fn = self._linked.get(raw)
        if fn is None:
            return self._first_call(raw, args)
        return fn(*args)

    def _first_call(self, raw: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        fn = self._link(raw, args)
        if fn is None:
            return _materialize(self)(*args)
        return fn(*args)

    def _link(self, raw: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        """The recorded overload for these arguments, linked once per call key (several
        raw keys can share one), or None when numba must run the call."""
        from onnxexec.kernels.objload import store
        from onnxexec.kernels.objload.elf import ObjectLoadError

        key = call_key(args)
        if self.real is not None or not enabled() or not has_key(key):
            return None
        with _lock:
            fn = self._by_key.get(key)
            if fn is None:
                record = store.read(self._name, key)
                if record is None:
                    return None
                try:
                    fn = store.build(sys.modules[self.py_func.__module__], record)
                except (ObjectLoadError, ImportError, OSError) as e:
                    log.debug("objload: %s via numba: %s", self._name, e)
                    return None
                self._by_key[key] = fn
            self._linked[raw] = fn
            return fn

    def __getattr__(self, name: str) -> Any:
        # numba dispatcher attributes (signatures, overloads, ...) need numba itself
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_materialize(self), name)

    def __repr__(self) -> str:
        return f"<LazyKernel {self._name}>"


def _record_all() -> None:
    """At exit of a process that used numba: record every overload the LazyKernels'
    dispatchers hold and the store lacks (whether numba compiled it or loaded it from
    its cache), for the next process."""
    from onnxexec.kernels.objload import argkey, store

    for k in _kernels:
        for sig, cres in list(getattr(k.real, "overloads", {}).items()):
            try:
                key = argkey.signature_key(sig)
            except Exception as e:  # recording is an optimisation: never fail over it
                log.debug("objload: not recording %s: %s", k._name, e)
                continue
            if key is not None and not store.exists(k._name, key):
                store.save(k._name, key, cres)


def njit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`numba.njit` that defers importing numba (see the module docstring)."""
    if fn is None:
        return lambda f: njit(f, **options)
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return fn
    if "numba" in sys.modules:
        return sys.modules["numba"].njit(fn, **options)
    kernel = LazyKernel(fn, options)
    with _lock:
        _kernels.append(kernel)
    return kernel


def _materialize(kernel: LazyKernel | None = None) -> Any:
    """Import numba and turn every LazyKernel into its numba dispatcher, everywhere an
    onnxexec module or a kernel's own module holds one; returns `kernel`'s
    dispatcher."""
    import numba

    with _lock:
        if enabled() and not any(k.real is not None for k in _kernels):
            atexit.register(_record_all)
        for k in _kernels:
            if k.real is None:
                k.real = numba.njit(k.py_func, **k.options)
        this = sys.modules[__name__]
        homes = {k.py_func.__module__ for k in _kernels}
        for name, mod in list(sys.modules.items()):
            if not isinstance(mod, ModuleType):
                continue
            if not name.startswith("onnxexec") and name not in homes:
                continue
            space = mod.__dict__
            for attr, value in list(space.items()):
                if isinstance(value, LazyKernel) and value.real is not None:
                    space[attr] = value.real
                elif value is this and mod is not this:
                    space[attr] = numba
    return kernel.real if kernel is not None else None


def on_numba_import(_numba: ModuleType) -> None:
    """Hooked to numba's import (kernels/__init__.py): whoever imports numba, kernels
    compiled from then on must see numba dispatchers, not LazyKernels."""
    if _kernels:
        _materialize()


def set_thread_hint(n: int) -> None:
    """The thread count the runtime asked for, for `get_num_threads` before numba."""
    global _thread_hint
    _thread_hint = max(1, n)


def get_num_threads() -> int:
    """numba's thread count once numba is in, else the count the runtime asked for."""
    if "numba" in sys.modules:
        return int(sys.modules["numba"].get_num_threads())
    return _thread_hint


def __getattr__(name: str) -> Any:
    # anything else kernel modules use through `nb.` (prange inside kernel bodies is
    # resolved at compile time, when `nb` is numba already)
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(name)  # `from objload import store` imports it instead
    import numba

    return getattr(numba, name)
