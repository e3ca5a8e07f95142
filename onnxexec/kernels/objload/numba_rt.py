"""What a numba kernel's object code calls into, without importing numba.

A compiled kernel calls numba's C helpers (`numba_*`: GIL, exceptions, math), its
runtime (`NRT_*`: array allocation and the adaptors between ndarrays and its array
structs) and the Python C API / libc / libm. The first two live in C extension
modules inside the numba package (`_helperlib`, `core/runtime/_nrt_python`), and
`_dynfunc.make_function` turns a kernel's CPython wrapper into a callable. Those
extensions need neither LLVM nor numba's Python code, but `import numba._helperlib`
would run `numba/__init__.py`, which loads llvmlite's LLVM library (~180 MB on disk;
~100 MB of RSS on a kernel that maps page-cache folios whole). So they are loaded
from their files and registered under their own names: a later `import numba` finds
and reuses the very same modules, so both share one runtime (NRT) state.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import pickle
import sys
from functools import cache
from types import ModuleType
from typing import Any

_EXTENSIONS = {
    "numba._helperlib": "_helperlib",
    "numba.core.runtime._nrt_python": os.path.join("core", "runtime", "_nrt_python"),
    "numba._dynfunc": "_dynfunc",
}


def numba_dir() -> str | None:
    """The installed numba package's folder, found without importing it. PathFinder
    directly, not importlib.util.find_spec: that asks sys.meta_path, where
    kernels/__init__.py's hook waits for numba's real import and would take this
    look-up for it."""
    spec = importlib.machinery.PathFinder.find_spec("numba")
    locations = getattr(spec, "submodule_search_locations", None)
    return next(iter(locations), None) if locations else None


def _extension(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    folder = numba_dir()
    if folder is None:
        raise ImportError("numba is not installed")
    stem = os.path.join(folder, _EXTENSIONS[name])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(stem + suffix):
            loader = importlib.machinery.ExtensionFileLoader(name, stem + suffix)
            spec = importlib.util.spec_from_file_location(name, stem + suffix, loader=loader)
            if spec is None:
                break
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[name] = module
            return module
    raise ImportError(f"numba extension {name} not found under {folder}")


_unpickled: dict[int, Any] = {}


def _unpickle(data: int, size: int, _sha1: int) -> Any:
    """numba_unpickle's work: the Python object a kernel serialized into its code (the
    ndarray class a returned array is boxed as, an exception's class and arguments).

    numba's C helper imports numba.core.serialize for this, i.e. all of numba, on the
    first array a kernel returns. Objects are kept per address as numba keeps them
    (the bytes are in a kernel's constants, which are never unloaded)."""
    obj = _unpickled.get(data)
    if obj is None:
        try:
            obj = pickle.loads(ctypes.string_at(data, size))
        except Exception:  # a pickle of numba's own types: numba's helper is needed
            from numba.core.serialize import _numba_unpickle

            obj = _numba_unpickle(data, ctypes.string_at(data, size), ctypes.string_at(_sha1, 20))
        _unpickled[data] = obj
    return obj


# ctypes hands a py_object result to C as a new reference, as numba_unpickle returns it
_UNPICKLE_FN = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
_unpickle_c = _UNPICKLE_FN(_unpickle)


@cache
def _symbols() -> dict[str, int]:
    table: dict[str, int] = {}
    for name, addr in _extension("numba._helperlib").c_helpers.items():
        table["numba_" + name] = addr
    # numba.core.runtime.nrt registers these the same way (internal names keep theirs)
    for name, addr in _extension("numba.core.runtime._nrt_python").c_helpers.items():
        table[name if name.startswith("_") else "NRT_" + name] = addr
    table["numba_unpickle"] = ctypes.cast(_unpickle_c, ctypes.c_void_p).value or 0
    return table


_process = ctypes.CDLL(None)  # libpython, libc, libm: what the interpreter has loaded


def resolve(name: str) -> int | None:
    """Address of a symbol a kernel needs, or None if neither numba's helpers nor the
    process define it."""
    addr = _symbols().get(name)
    if addr is not None:
        return addr
    try:
        return ctypes.cast(getattr(_process, name), ctypes.c_void_p).value
    except AttributeError:
        return None


def make_callable(
    module: ModuleType, name: str, wrapper: int, env_slot: int, consts: list[Any], keep: Any
) -> Any:
    """A Python callable for a kernel's CPython wrapper at address `wrapper`.

    The wrapper reads its environment (module globals, constants such as the dtypes of
    returned arrays) from the global variable at `env_slot`, as numba's
    `CPUContext.get_executable` / `codegen.set_env` arrange it."""
    dynfunc = _extension("numba._dynfunc")
    env = dynfunc.Environment(module.__dict__)
    env.consts[:] = consts
    ctypes.c_void_p.from_address(env_slot).value = id(env)
    return dynfunc.make_function(
        module, name, f"compiled wrapper for {name!r}", wrapper, env, (keep, env)
    )
