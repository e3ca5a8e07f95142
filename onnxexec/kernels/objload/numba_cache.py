"""numba's own cache, per kernel module: `<store>/numba/<sources>-<isa>` where
`<sources>` is the kernel module's import-closure digest (objload/sources.py), so an
edited kernel module invalidates only the cached kernels that can contain its code.

numba checks a cached function against its own source file only, while a kernel embeds
the code of the jitted functions it calls, from other files: so the folder, not numba's
index, has to change when any of those files does. numba has one cache folder per
process (its documented `numba.config.CACHE_DIR`), read when a `cache=True` function is
decorated (numba 0.68's UserProvidedCacheLocator, pinned in pyproject.toml; tests/unit/
kernels/test_module_keys.py fails if that changes). So it is set to the module's folder
while that module's dispatchers are made:

- objload's placeholders are made inside `cache_dir_for(module)`;
- modules that use numba directly made theirs while they ran: `ModuleCaches`, one
  import hook for onnxexec.kernels.* / onnxexec.native.*, makes their still-empty
  dispatchers' caches again (`Dispatcher.enable_caching`) inside `cache_dir_for`, right
  after the module ran, when numba is imported.

Anything else (cfuncs compiled at decoration, dispatchers held only in containers)
keeps the process-wide folder, named by the digest of every kernel source.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from onnxexec.kernels.objload import sources

_lock = threading.RLock()


def folder_for(module: str) -> str:
    """numba's cache folder for the kernels of `module`."""
    from onnxexec.kernels import cachedir

    return cachedir.numba_cache_dir(sources.digest(module))


@contextlib.contextmanager
def cache_dir_for(module: str) -> Iterator[None]:
    """numba's CACHE_DIR is `module`'s folder inside (when numba is imported and the
    store is usable; otherwise the process-wide folder stays)."""
    from onnxexec.kernels import cachedir, private_cache_dirs

    numba = sys.modules.get("numba")
    if numba is None or private_cache_dirs or cachedir.store_dir("numba", create=True) is None:
        yield
        return
    folder = folder_for(module)
    if not cachedir.safe_dir(folder, True):
        yield
        return
    with _lock:
        before = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = folder
        try:
            yield
        finally:
            numba.config.CACHE_DIR = before


def repoint(module: ModuleType) -> int:
    """Give `module`'s own caching dispatchers that hold no overload yet the module's
    cache folder; returns how many."""
    # no dispatcher can exist before numba's Dispatcher class does (a kernel module
    # imported during numba's own import, kernels/isa.py for its codegen hook, has none)
    Dispatcher = getattr(sys.modules.get("numba.core.dispatcher"), "Dispatcher", None)
    if Dispatcher is None:
        return 0
    name = module.__name__
    todo = [
        v
        for v in vars(module).values()
        if isinstance(v, Dispatcher)
        and getattr(v.py_func, "__module__", None) == name
        and not v.overloads
        and type(getattr(v, "_cache", None)).__name__ == "FunctionCache"  # cache=True
    ]
    if todo:
        with cache_dir_for(name):
            for disp in todo:
                disp.enable_caching()
    return len(todo)


def in_scope(name: str) -> bool:
    return (
        name.startswith(("onnxexec.kernels.", "onnxexec.native"))
        and not name.startswith("onnxexec.kernels.objload")
        and name != "onnxexec.kernels.cachedir"
    )


class ModuleCaches(importlib.abc.MetaPathFinder):
    """Runs `repoint` on each kernel / native module right after it ran (see the module
    docstring); other imports pass through untouched."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if not in_scope(name):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_then_repoint(module: ModuleType) -> None:
            run(module)
            repoint(module)

        loader.exec_module = exec_then_repoint  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Put one `ModuleCaches` hook first in sys.meta_path (once)."""
    if not any(isinstance(f, ModuleCaches) for f in sys.meta_path):
        sys.meta_path.insert(0, ModuleCaches())
