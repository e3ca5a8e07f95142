"""numba kernels; one module per kernel family.

Importing this package arranges that numba learns BLAS exists without importing
scipy.linalg. numba's CPU target imports `numba.np.arraymath` on its first compile or
cached-kernel load, and that module's top level runs `_check_blas()`, which imports
`scipy.linalg.cython_blas` only to learn whether it could: about 0.1-0.5 s and 16-29 MB
(measured here) in every process, before any kernel runs. The answer (`_HAVE_BLAS`)
only picks np.convolve/np.correlate's inner product; np.dot and np.linalg still call
numba's real `ensure_blas` when they are compiled, and numba's runtime imports the
BLAS pointers it needs when such code runs. So the check is answered from whether scipy
is installed at all (`find_spec` imports nothing) and scipy.linalg loads only for code
that uses it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
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


def _codegen_with_lazy_ir(run: Callable[[ModuleType], None], module: ModuleType) -> None:
    run(module)
    _parse_linking_ir_on_demand(module)


if "numba.core.codegen" in sys.modules:
    _parse_linking_ir_on_demand(sys.modules["numba.core.codegen"])
else:
    _around("numba.core.codegen", _codegen_with_lazy_ir)
