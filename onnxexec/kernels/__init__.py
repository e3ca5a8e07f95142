"""numba kernels; one module per kernel family.

Importing this package adjusts numba's caching and five of its internals, each guarded
(skipped when this numba lacks what it patches) and tested in a subprocess
(tests/unit/kernels/test_numba_setup.py):
- cached kernels are dropped when any kernel source changed (`_drop_stale_caches`);
- numba's runtime functions load from cached object code (`_nrt_from_object_cache`);
- a cached kernel loads without the compiler's registries (`_load_without_refresh`);
- its linking IR stays bitcode until a compile needs it (`_parse_linking_ir_on_demand`);
- a kernel library keeps its object code for kernels/objload (`_keep_object_code`),
  and importing numba turns objload's LazyKernels into numba dispatchers;
- numba learns BLAS exists without importing scipy.linalg (below);
- numba's code generation obeys the ONNXEXEC_ISA cap (kernels/isa.py).

The BLAS check: numba's CPU target imports `numba.np.arraymath` on its first compile
(and, without the first patch, on its first cached-kernel load), and that module's top
level runs `_check_blas()`, which imports `scipy.linalg.cython_blas` only to learn
whether it could: about 0.1-0.5 s and 16-29 MB (measured here) in every process, before
any kernel runs. The answer (`_HAVE_BLAS`) only picks np.convolve/np.correlate's inner
product; np.dot and np.linalg still call numba's real `ensure_blas` when they are
compiled, and numba's runtime imports the BLAS pointers it needs when such code runs. So
the check is answered from whether scipy is installed at all (`find_spec` imports
nothing) and scipy.linalg loads only for code that uses it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


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
    needed = ("_unserialize", "_get_module_for_linking")
    if lib_cls is None or not all(hasattr(lib_cls, a) for a in needed):
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
    needed = ("_unserialize", "_object_compiled_hook")
    if lib_cls is None or not all(hasattr(lib_cls, a) for a in needed):
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
    if cache_cls is None or not hasattr(cache_cls, "_load_overload"):
        return
    if getattr(cache_cls, "_onnxexec_no_refresh", False):
        return
    if not hasattr(cache_cls, "_guard_against_spurious_io_errors"):
        return
    from numba.core.runtime import rtsys

    def load_overload(self, sig, target_context):  # type: ignore[no-untyped-def]
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    cache_cls.load_overload = load_overload
    cache_cls._onnxexec_no_refresh = True


_when_imported("numba.core.caching", _load_without_refresh)


def _nrt_from_object_cache(nrtdynmod: ModuleType) -> None:
    """Load numba's runtime functions (NRT) from object code cached on disk.

    Every process that runs a kernel first compiles the NRT module (atomic refcount
    helpers numba's allocations call) with LLVM's full optimization pipeline: that
    first compile of the process sets up the pass managers and costs ~30 MB of RSS and
    ~30 ms, before any kernel is even loaded. Our kernels come from numba's cache as
    object code, so nothing else in a warm process runs the optimizer. Here the NRT
    library is cached the same way, where numba keeps ours (NUMBA_CACHE_DIR or
    kernels/__pycache__), under a key of the module's IR text and the codegen's magic
    tuple (target triple, CPU name, features: what numba keys its caches on), and
    loaded with `unserialize_library` like a cached kernel (measured: +10 MB instead of
    +30 MB). Any failure falls back to compiling.
    """
    compile_nrt = getattr(nrtdynmod, "compile_nrt_functions", None)
    create = getattr(nrtdynmod, "create_nrt_module", None)
    if compile_nrt is None or create is None or getattr(compile_nrt, "_onnxexec", False):
        return

    def compile_nrt_functions(ctx):  # type: ignore[no-untyped-def]
        try:
            return _cached_nrt(ctx, create)
        except Exception:  # a cache problem must never stop a kernel from loading
            return compile_nrt(ctx)

    compile_nrt_functions._onnxexec = True  # type: ignore[attr-defined]
    nrtdynmod.compile_nrt_functions = compile_nrt_functions


def _cached_nrt(ctx: Any, create: Callable[[Any], Any]) -> Any:
    import pickle
    import tempfile

    import llvmlite
    import numba

    ir_mod, library = create(ctx)
    codegen = ctx.codegen()
    key = repr((str(ir_mod), codegen.magic_tuple(), numba.__version__, llvmlite.__version__))
    folder = numba.config.CACHE_DIR or os.path.join(os.path.dirname(__file__), "__pycache__")
    path = os.path.join(folder, f"nrt-{hashlib.sha256(key.encode()).hexdigest()[:24]}.pkl")
    try:
        with open(path, "rb") as f:
            return codegen.unserialize_library(pickle.load(f))
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    library.enable_object_caching()
    library.add_ir_module(ir_mod)
    library.finalize()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    except OSError:
        return library  # read-only install: compile every time, as numba does
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(library.serialize_using_object_code(), f)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return library


_when_imported("numba.core.runtime.nrtdynmod", _nrt_from_object_cache)


@functools.cache
def sources_digest() -> str:
    """sha256 of every kernels/*.py: what a compiled kernel's code depends on."""
    folder = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def _drop_stale_caches(caching: ModuleType) -> None:
    """Delete this package's numba cache files when any kernel module's source changed.

    numba checks a cached function against its own file's timestamp only, but a kernel
    that calls another jitted function has the callee's code compiled into it: after
    an edit or an upgrade that changed a callee (a packed-GEMM micro-kernel, say) and
    not its caller's file, the caller would keep running the old callee, e.g. reading
    a weight in the previous packed layout (seen here: wrong products after a merge).
    So one digest of every kernels/*.py is kept beside the cache files, and a
    mismatch clears them all once; numba then recompiles on first use. Hashing the
    sources costs ~2 ms per process that loads numba.
    """

    folder = os.path.dirname(os.path.abspath(__file__))
    stamp = sources_digest()
    caches = [os.path.join(folder, "__pycache__")]
    config = sys.modules.get("numba.core.config")
    locator = getattr(caching, "_UserProvidedCacheLocator", None)
    if getattr(config, "CACHE_DIR", "") and hasattr(locator, "get_suitable_cache_subpath"):
        sub = locator.get_suitable_cache_subpath(os.path.join(folder, "__init__.py"))
        caches.append(os.path.join(config.CACHE_DIR, sub))
    for cache in caches:
        _clear_if_changed(cache, stamp)


def _clear_if_changed(cache: str, stamp: str) -> None:

    path = os.path.join(cache, "onnxexec-kernels.sha256")
    try:
        with open(path) as f:
            if f.read().strip() == stamp:
                return
    except OSError:
        if not os.path.isdir(cache):
            return  # nothing cached yet
    try:
        for name in os.listdir(cache):
            if name.endswith((".nbi", ".nbc")):
                os.remove(os.path.join(cache, name))
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(stamp)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only install has only the caches it shipped with


_when_imported("numba.core.caching", _drop_stale_caches)


def _cap_codegen(codegen: ModuleType) -> None:
    from onnxexec.kernels.isa import cap_numba_codegen

    cap_numba_codegen(codegen)


_when_imported("numba.core.codegen", _cap_codegen)


def _objload_hook(numba: ModuleType) -> None:
    from onnxexec.kernels.objload import on_numba_import

    on_numba_import(numba)


_when_imported("numba", _objload_hook)
