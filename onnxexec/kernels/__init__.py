"""numba kernels; one module per kernel family.

When numba is imported (by the first kernel that has no record, never by importing
this package's modules that use kernels/objload), onnxexec points numba's cache at
the per-user store (`_numba_cache_in_store`: `<store>/numba/<sources>-<isa>`, see
kernels/cachedir.py), through numba's public `numba.config.CACHE_DIR`. numba checks
a cached function against its own file only, but a kernel embeds the code of the
jitted functions it calls, so an edit of a callee must not reuse its caller's cache:
each kernel module's dispatchers cache in a folder named by the digest of its import
closure (objload/numba_cache.py, objload/sources.py; the one hook installed below),
anything else in one named by the digest of every kernel source. A changed source is
a new folder; nothing is deleted, so no process can remove what another one compiled.

Five patches of numba internals remain, each pinned to the numba / llvmlite versions
in pyproject.toml and listed in `NUMBA_PATCHES`; tests/unit/kernels/test_numba_setup.py
fails when one of their attributes is missing (here, a missing one is logged as a
warning and its patch skipped: the kernels still run, only slower or bigger):
- a kernel library keeps its object code for kernels/objload (`_keep_object_code`):
  there is no public way to get a cached library's object code back, and objload's
  records are made from it;
- a cached kernel loads without the compiler's registries (`_load_without_refresh`);
- its linking IR stays bitcode until a compile needs it (`_parse_linking_ir_on_demand`);
- numba learns BLAS exists without importing scipy.linalg (below);
- numba's code generation obeys the ONNXEXEC_ISA cap (`_cap_codegen`, kernels/isa.py).
Importing numba also turns objload's LazyKernels into numba dispatchers.

The BLAS check: numba's CPU target imports `numba.np.arraymath` on its first compile
(and, without `_load_without_refresh`, on its first cached-kernel load), and that
module's top level runs `_check_blas()`, which imports `scipy.linalg.cython_blas` only
to learn whether it could: about 0.1-0.5 s and 16-29 MB (measured here) in every
process, before any kernel runs. The answer (`_HAVE_BLAS`) only picks
np.convolve/np.correlate's inner product; np.dot and np.linalg still call numba's real
`ensure_blas` when they are compiled, and numba's runtime imports the BLAS pointers it
needs when such code runs. So the check is answered from whether scipy is installed at
all (`find_spec` imports nothing) and scipy.linalg loads only for code that uses it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

log = logging.getLogger(__name__)

# (module, class or None, attributes) each patch below relies on; numba 0.68 / llvmlite
# 0.50 as pinned in pyproject.toml. tests/unit/kernels/test_numba_setup.py checks them.
NUMBA_PATCHES: Final = {
    "_keep_object_code": ("numba.core.codegen", "CPUCodeLibrary",
                          ("_unserialize", "_object_compiled_hook")),
    "_parse_linking_ir_on_demand": ("numba.core.codegen", "CPUCodeLibrary",
                                    ("_unserialize", "_get_module_for_linking")),
    "_load_without_refresh": ("numba.core.caching", "Cache",
                              ("_load_overload", "_guard_against_spurious_io_errors")),
    "_arraymath_with_presence_check": ("numba.np.linalg", None, ("ensure_blas",)),
    "_cap_codegen": ("numba.core.codegen", None, ("get_host_cpu_features",)),
}  # fmt: skip


def missing_patch_targets(patch: str) -> list[str]:
    """The attributes patch `patch` needs that this numba lacks (imports numba)."""
    import importlib

    module_name, cls_name, attrs = NUMBA_PATCHES[patch]
    target: Any = importlib.import_module(module_name)
    if cls_name is not None:
        target = getattr(target, cls_name, None)
        if target is None:
            return [f"{module_name}.{cls_name}"]
    where = f"{module_name}.{cls_name}" if cls_name else module_name
    return [f"{where}.{a}" for a in attrs if not hasattr(target, a)]


def _targets_present(patch: str, target: Any) -> bool:
    missing = [a for a in NUMBA_PATCHES[patch][2] if not hasattr(target, a)]
    if missing:
        log.warning("onnxexec: numba lacks %s; %s skipped (see pyproject's numba pin)",
                    ", ".join(missing), patch)  # fmt: skip
    return not missing


def _scipy_installed() -> None:
    if importlib.util.find_spec("scipy") is None:
        raise ImportError("scipy is required for linear algebra")


class _AroundImport(importlib.abc.MetaPathFinder):
    """Runs `wrap(exec_module, module)` in place of the one import of module `name`
    (whenever numba makes it: a process that runs no kernel never does)."""

    def __init__(self, name: str, wrap: Callable[[Callable[[ModuleType], None], ModuleType], None]):
        self.name, self.wrap = name, wrap

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, wrap = loader.exec_module, self.wrap
        loader.exec_module = lambda module: wrap(run, module)
        return spec


def _around(name: str, wrap: Callable[[Callable[[ModuleType], None], ModuleType], None]) -> None:
    if name in sys.modules:
        return
    if not any(isinstance(f, _AroundImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AroundImport(name, wrap))


_PATCHES: dict[str, list[Callable[[ModuleType], None]]] = {}


def _when_imported(name: str, patch: Callable[[ModuleType], None]) -> None:
    """patch(module) now if `name` is imported, else right after its import runs (the
    patches of one module in the order they were asked for)."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    if name in _PATCHES:
        _PATCHES[name].append(patch)
        return
    _PATCHES[name] = [patch]

    def run_then_patch(run: Callable[[ModuleType], None], module: ModuleType) -> None:
        run(module)
        for each in _PATCHES.pop(name, []):
            each(module)

    _around(name, run_then_patch)


def when_imported(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Run hook(module) once module `name` is imported (now, if it already is)."""
    _when_imported(name, hook)


def _arraymath_with_presence_check(run: Callable[[ModuleType], None], module: ModuleType) -> None:
    """numba.np.arraymath's `_check_blas()` sees `_scipy_installed`; numba's real
    `ensure_blas` is back in place once the module has run."""
    import numba.np.linalg as nplinalg

    if not _targets_present("_arraymath_with_presence_check", nplinalg):
        run(module)
        return
    real = nplinalg.ensure_blas
    nplinalg.ensure_blas = _scipy_installed
    try:
        run(module)
    finally:
        nplinalg.ensure_blas = real
        # arraymath bound the name at import; later callers get numba's check
        module.ensure_blas = real


_around("numba.np.arraymath", _arraymath_with_presence_check)


def _parse_linking_ir_on_demand(codegen: ModuleType) -> None:
    """Keep a cached kernel's linking IR as bitcode bytes until something links it.

    Loading a kernel from numba's cache parses the bitcode stored beside its object
    code into an LLVM module (`_shared_module`) and keeps it for as long as the process
    lives, although it is read again only when a newly compiled function calls that
    kernel and links it in for inlining. In memory that IR is ~10x its bitcode:
    dropping it after loading saved 38 MB of a SmolLM2 process (20 kernels). So the
    bytes are kept instead and parsed again the first time a compile needs them.
    numba internals: skipped when this numba's library class lacks them.
    """
    lib_cls = getattr(codegen, "CPUCodeLibrary", None)
    if not _targets_present("_parse_linking_ir_on_demand", lib_cls):
        return
    if getattr(lib_cls, "_onnxexec_lazy_ir", False):
        return
    import llvmlite.binding as ll

    unserialize = lib_cls._unserialize.__func__
    module_for_linking = lib_cls._get_module_for_linking

    def _unserialize(cls, codegen_, state):  # type: ignore[no-untyped-def]
        lib = unserialize(cls, codegen_, state)
        _, kind, data = state
        if kind == "object" and getattr(lib, "_shared_module", None) is not None:
            lib._onnxexec_bitcode = data[1]
            lib._shared_module = None
        return lib

    def _get_module_for_linking(self):  # type: ignore[no-untyped-def]
        bitcode = self.__dict__.pop("_onnxexec_bitcode", None)
        if bitcode is not None and self._shared_module is None:
            self._shared_module = ll.parse_bitcode(bitcode)
        return module_for_linking(self)

    lib_cls._unserialize = classmethod(_unserialize)
    lib_cls._get_module_for_linking = _get_module_for_linking
    lib_cls._onnxexec_lazy_ir = True


_when_imported("numba.core.codegen", _parse_linking_ir_on_demand)


OBJECT_ATTR = "_onnxexec_object"  # where a numba library's object code is kept


def _keep_object_code(codegen: ModuleType) -> None:
    """Keep each kernel library's object code, for kernels/objload to record.

    numba hands a library's object code to LLVM and then forgets it (its getbuffer
    hook clears it), so a kernel's object code is only on the library while the
    library is being compiled or unpickled from numba's cache. Both places store it
    on the library too (tens of KB per kernel). numba internals: skipped when this
    numba's library class lacks them.
    """
    lib_cls = getattr(codegen, "CPUCodeLibrary", None)
    if not _targets_present("_keep_object_code", lib_cls):
        return
    if getattr(lib_cls, "_onnxexec_keeps_object", False):
        return
    unserialize = lib_cls._unserialize.__func__
    compiled_hook = lib_cls._object_compiled_hook.__func__

    def _unserialize(cls, codegen_, state):  # type: ignore[no-untyped-def]
        lib = unserialize(cls, codegen_, state)
        if state[1] == "object":
            setattr(lib, OBJECT_ATTR, state[2][0])
        return lib

    def _object_compiled_hook(cls, ll_module, buf):  # type: ignore[no-untyped-def]
        compiled_hook(cls, ll_module, buf)
        lib = getattr(ll_module, "_CPUCodeLibrary__library", None)  # numba's `__library`
        if lib is not None and getattr(lib, "_object_caching_enabled", False):
            setattr(lib, OBJECT_ATTR, buf)

    lib_cls._unserialize = classmethod(_unserialize)
    lib_cls._object_compiled_hook = classmethod(_object_compiled_hook)
    lib_cls._onnxexec_keeps_object = True


_when_imported("numba.core.codegen", _keep_object_code)


def _load_without_refresh(caching: ModuleType) -> None:
    """Load a cached kernel without first refreshing the compiler's registries.

    numba's `Cache.load_overload` calls `target_context.refresh()` before it reads the
    cache: that imports and registers every typing and lowering module numba has
    (~60 modules: numba.typed, numba.np.random, polynomial, jitclass, ...), 0.1 s and
    12 MB of a MobileNetV2 process (measured: first cached dispatch 0.12 -> 0.023 s,
    peak RSS 191 -> 180 MB), although rebuilding a cached kernel needs none of it:
    unpickling its signature, loading its object code and registering its entry point
    use the base context. What it does need is the runtime (NRT: the allocator behind
    np.empty inside kernels), so that is initialized here. A real compile still
    refreshes everything first (numba's CompilerBase does so on construction).
    """
    cache_cls = getattr(caching, "Cache", None)
    if not _targets_present("_load_without_refresh", cache_cls):
        return
    if getattr(cache_cls, "_onnxexec_no_refresh", False):
        return
    from numba.core.runtime import rtsys

    def load_overload(self, sig, target_context):  # type: ignore[no-untyped-def]
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    cache_cls.load_overload = load_overload
    cache_cls._onnxexec_no_refresh = True


_when_imported("numba.core.caching", _load_without_refresh)


@functools.cache
def sources_digest() -> str:
    """sha256 of every kernels/**.py (but objload/, the loader) and native/*.py (the
    pool's numba loop calls kernels' intrinsics): what a compiled kernel depends on."""
    kernels = os.path.dirname(os.path.abspath(__file__))
    native = os.path.join(os.path.dirname(kernels), "native")
    digest = hashlib.sha256()
    for top in (kernels, native):
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in ("objload", "__pycache__"))
            for name in sorted(f for f in files if f.endswith(".py")):
                rel = os.path.relpath(os.path.join(folder, name), os.path.dirname(kernels))
                with open(os.path.join(folder, name), "rb") as f:
                    digest.update(rel.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def kernel_sources(folder: str) -> list[str]:
    """The .py files under `folder` (relative, '/'-separated, sorted), objload/ and
    __pycache__ folders left out."""
    found = []
    for dirpath, dirs, files in os.walk(folder):
        rel = os.path.relpath(dirpath, folder).replace(os.sep, "/")
        dirs[:] = sorted(d for d in dirs if d not in ("objload", "__pycache__") or rel != ".")
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        prefix = "" if rel == "." else rel + "/"
        found += [prefix + f for f in files if f.endswith(".py")]
    return sorted(found)


private_cache_dirs: list[str] = []


def _numba_cache_in_store(numba: ModuleType) -> None:
    """numba caches (this process's later njit(cache=True) functions, onnxexec's
    kernels among them) in `<store>/numba/<sources>-<isa>`, via numba's documented
    config.CACHE_DIR; it overrides NUMBA_CACHE_DIR, as one store serves onnxexec. With
    no usable store, in a folder of this process's own, deleted at exit: numba's
    default (beside the sources) could serve kernels compiled from other sources."""
    from onnxexec.kernels import cachedir

    folder = cachedir.numba_cache_dir(sources_digest())
    if cachedir.store_dir("numba", create=True) is None or not cachedir.safe_dir(folder, True):
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="onnxexec-numba-")
        private_cache_dirs.append(folder)
        atexit.register(shutil.rmtree, folder, True)
    numba.config.CACHE_DIR = folder


_when_imported("numba", _numba_cache_in_store)


def _cap_codegen(codegen: ModuleType) -> None:
    from onnxexec.kernels.isa import cap_numba_codegen

    cap_numba_codegen(codegen)


_when_imported("numba.core.codegen", _cap_codegen)


def _objload_hook(numba: ModuleType) -> None:
    from onnxexec.kernels.objload import on_numba_import

    on_numba_import(numba)


_when_imported("numba", _objload_hook)


def _per_module_numba_caches() -> None:
    from onnxexec.kernels.objload import numba_cache

    numba_cache.install()


_per_module_numba_caches()
