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
the same kernels, numba, CPU and Python link the records and never load LLVM. Records
are plain data (store.py specifies the format; nothing is unpickled) in the per-user
store (kernels/cachedir.py), whatever the working directory or install location. Set
ONNXEXEC_OBJLOAD=0 to always use numba. NUMBA_DISABLE_JIT=1 leaves plain functions.

`cfunc` works the same way for C callbacks (the native thread pool's span kernels):
its `address` comes from a record. `intrinsic` only defers numba's decorator: an
intrinsic's code is part of the kernels that call it. Kernels with `prange` are
recorded as needing numba (they call its threading layer), and so run through numba.
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
_kernels: list[_Lazy] = []
_late: list[tuple[str, Any, str]] = []  # (kernel name, numba object, module)
CFUNC_KEY = ("cfunc",)
_thread_hint = 1
_SUBMODULES = frozenset(
    {"argkey", "elf", "inventory", "numba_cache", "numba_rt", "sources", "store", "watch"}
)


def enabled() -> bool:
    return os.environ.get("ONNXEXEC_OBJLOAD", "1") != "0"


class _Lazy:
    """A numba object (`real`) deferred until numba is imported; `made(numba)` makes it
    with numba's cache in its module's folder (numba_cache.py)."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.options = options
        self.real: Any = None
        self._name = f"{py_func.__module__}.{py_func.__qualname__}"
        with _lock:
            _kernels.append(self)

    def make(self, numba: ModuleType) -> Any:
        raise NotImplementedError

    def made(self, numba: ModuleType) -> Any:
        from onnxexec.kernels.objload.numba_cache import cache_dir_for

        with cache_dir_for(self.py_func.__module__):
            return self.make(numba)

    def __getattr__(self, name: str) -> Any:
        # numba's own attributes (signatures, overloads, ...) need numba itself
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_materialize(self), name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name}>"


class LazyKernel(_Lazy):
    """Stands for `numba.njit(**options)(py_func)` until numba is needed."""

    def __init__(self, py_func: Callable[..., Any], options: dict[str, Any]) -> None:
        super().__init__(py_func, options)
        self._linked: dict[tuple[Any, ...], Any] = {}  # by argkey.raw_key
        self._by_key: dict[tuple[Any, ...], Any] = {}  # by argkey.call_key

    def make(self, numba: ModuleType) -> Any:
        return numba.njit(self.py_func, **self.options)

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

    def linked(self, args: tuple[Any, ...]) -> Callable[..., Any] | None:
        """The overload already linked for arguments like these, or None (numba runs
        this kernel, or no call of this layout has been made yet). A caller making
        many calls of one argument layout keeps it and skips `raw_key`: ~1.5 us for
        ten arguments, more than numba's own dispatch."""
        if self.real is not None:
            return None
        return self._linked.get(raw_key(args))

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
                record = store.read(self._name, key, self.py_func.__module__)
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

    def warm(self, *args: Any) -> None:
        """Link (or, under numba, compile) the overload for `args` without calling it:
        in the thread that calls this, not in the one that first runs the kernel."""
        if self.real is None and self._link(raw_key(args), args) is not None:
            return
        real = _materialize(self)
        real.compile(tuple(real.typeof_pyval(a) for a in args))


class LazyIntrinsic(_Lazy):
    """Stands for `numba.extending.intrinsic(py_func)`: only compiled code calls an
    intrinsic, and compiling imports numba, which turns this into the real one."""

    def make(self, numba: ModuleType) -> Any:
        from numba.extending import intrinsic as make_intrinsic

        return make_intrinsic(self.py_func, **self.options)

    def __call__(self, *args: Any) -> Any:
        raise TypeError(f"intrinsic {self._name} can only be called from compiled code")


class LazyCFunc(_Lazy):
    """Stands for `numba.cfunc(signature(numba.types), **options)(py_func)`: its C
    `address` comes from a record (key ("cfunc",)) or, failing that, from numba."""

    def __init__(self, py_func: Callable[..., Any], signature: Callable[[Any], Any],
                 options: dict[str, Any]) -> None:  # fmt: skip
        super().__init__(py_func, options)
        self.signature = signature
        self._address: int | None = None

    def make(self, numba: ModuleType) -> Any:
        return numba.cfunc(self.signature(numba.types), **self.options)(self.py_func)

    @property
    def address(self) -> int:
        if self.real is not None:
            return int(self.real.address)
        if self._address is None and enabled() and "numba" not in sys.modules:
            from onnxexec.kernels.objload import store
            from onnxexec.kernels.objload.elf import ObjectLoadError

            with _lock:
                record = store.read(self._name, CFUNC_KEY, self.py_func.__module__)
                if record is not None:
                    try:
                        self._address, self._keep = store.build_cfunc(record)
                    except (ObjectLoadError, ImportError, OSError) as e:
                        log.debug("objload: %s via numba: %s", self._name, e)
        if self._address is not None:
            return self._address
        return int(_materialize(self).address)


def _record_all() -> None:
    """At exit of a process that used numba: record every overload the LazyKernels'
    dispatchers hold and the store lacks (whether numba compiled it or loaded it from
    its cache), every compiled cfunc, and the same for kernels defined after numba
    came in (`_late`), for the next process."""
    from onnxexec.kernels.objload import argkey, store

    made = [(k._name, k.real, k.py_func.__module__) for k in _kernels if k.real is not None]
    for name, real, module in made + _late:
        if getattr(real, "_library", None) is not None and hasattr(real, "native_name"):
            if not store.exists(name, CFUNC_KEY, module):
                store.save_cfunc(name, real, module)
            continue
        for sig, cres in list(getattr(real, "overloads", {}).items()):
            try:
                key = argkey.signature_key(sig)
            except Exception as e:  # recording is an optimisation: never fail over it
                log.debug("objload: not recording %s: %s", name, e)
                continue
            if key is not None and not store.exists(name, key, module):
                store.save(name, key, cres, module)


def _late_made(fn: Callable[..., Any], real: Any) -> Any:
    """A numba object made after numba was imported in a process that started without
    it (kernel modules imported late): recorded at exit like a LazyKernel's."""
    if _kernels and enabled():
        with _lock:
            _late.append((f"{fn.__module__}.{fn.__qualname__}", real, fn.__module__))
    return real


def njit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`numba.njit` that defers importing numba (see the module docstring)."""
    if fn is None:
        return lambda f: njit(f, **options)
    if jit_disabled():
        return fn
    if "numba" in sys.modules:
        from onnxexec.kernels.objload.numba_cache import cache_dir_for

        with cache_dir_for(fn.__module__):
            return _late_made(fn, sys.modules["numba"].njit(fn, **options))
    return LazyKernel(fn, options)


def intrinsic(fn: Callable[..., Any]) -> Any:
    """`numba.extending.intrinsic` that defers importing numba. The definition's body
    runs only when numba compiles a kernel that calls it, so it imports numba's
    `types` / `cgutils` there, not at module level."""
    if "numba" in sys.modules:
        from numba.extending import intrinsic as make_intrinsic

        return make_intrinsic(fn)
    return LazyIntrinsic(fn, {})


def cfunc(signature: Callable[[Any], Any], **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """`numba.cfunc` that defers importing numba; `signature(numba.types)` builds the
    signature when numba compiles it."""

    def wrap(fn: Callable[..., Any]) -> Any:
        if "numba" in sys.modules:
            from onnxexec.kernels.objload.numba_cache import cache_dir_for

            numba = sys.modules["numba"]
            with cache_dir_for(fn.__module__):
                return _late_made(fn, numba.cfunc(signature(numba.types), **options)(fn))
        return LazyCFunc(fn, signature, options)

    return wrap


def jit_disabled() -> bool:
    """NUMBA_DISABLE_JIT, read as numba reads it, without importing numba."""
    return os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")


def host_cpu_flags() -> frozenset[str]:
    """The instruction-set flags kernels may use: kernels/isa.py's, the host's capped
    by ONNXEXEC_ISA (kept under this name for callers from before the cap)."""
    from onnxexec.kernels.isa import flags

    return flags()


class _LazyModule:
    """A numba module imported on first attribute access: for names that intrinsic
    definitions use in their bodies (`types`, `cgutils`), which run only while numba
    compiles."""

    def __init__(self, name: str) -> None:
        self._module_name = name

    def __getattr__(self, attr: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._module_name), attr)


def lazy_module(name: str) -> Any:
    return _LazyModule(name)


def warm(kernel: Any, *args: Any) -> None:
    """Have `kernel` ready for `args` (linked from a record, or compiled / loaded by
    numba) without calling it."""
    if isinstance(kernel, LazyKernel):
        kernel.warm(*args)
    else:
        kernel.compile(tuple(kernel.typeof_pyval(a) for a in args))


def _materialize(kernel: _Lazy | None = None) -> Any:
    """Import numba and turn every placeholder into its numba object, everywhere an
    onnxexec module or a kernel's own module holds one; returns `kernel`'s."""
    import numba

    with _lock:
        if enabled() and not any(k.real is not None for k in _kernels):
            atexit.register(_record_all)
        # dispatchers and intrinsics (nothing compiles yet), swapped in before any
        # cfunc is made: numba compiles a cfunc at once, and that compile must find
        # numba objects, not placeholders, in the modules it reads. Other cfuncs wait
        # for their `address`: this may run inside numba's own import, before the
        # hooks a compile needs (sgemm_packed's asm parser) have run.
        for k in _kernels:
            if k.real is None and not isinstance(k, LazyCFunc):
                k.real = k.made(numba)
        _swap(numba)
        if isinstance(kernel, LazyCFunc) and kernel.real is None:
            kernel.real = kernel.made(numba)
    return kernel.real if kernel is not None else None


def _swap(numba: ModuleType) -> None:
    """Replace placeholders (and kernel modules' `nb`) by numba's objects in every
    onnxexec module and every module that defined a placeholder."""
    with _lock:
        this = sys.modules[__name__]
        homes = {k.py_func.__module__ for k in _kernels}
        for name, mod in list(sys.modules.items()):
            if not isinstance(mod, ModuleType):
                continue
            if not name.startswith("onnxexec") and name not in homes:
                continue
            space = mod.__dict__
            for attr, value in list(space.items()):
                if isinstance(value, _Lazy) and value.real is not None:
                    space[attr] = value.real
                elif value is this and attr == "nb":  # kernel modules' alias only
                    space[attr] = numba


def on_numba_import(_numba: ModuleType) -> None:
    """Hooked to numba's import (kernels/__init__.py): whoever imports numba, kernels
    compiled from then on must see numba dispatchers, not LazyKernels; its compiles
    are counted from then on (watch.py)."""
    from onnxexec.kernels.objload import watch

    watch.listen(_numba)
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
