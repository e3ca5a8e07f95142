"""Run an unmodified `import onnxruntime` program on onnxexec.

    python -m onnxexec.as_onnxruntime app.py [args...]
    python -m onnxexec.as_onnxruntime -m package.module [args...]
    onnxexec as-onnxruntime -- python app.py [args...]

`install()` puts an import hook first on `sys.meta_path` that answers for
`onnxruntime` (onnxexec.capi.ort_module) and `onnxruntime.capi[.X]` (onnxexec.capi[.X]),
so neither the installed onnxruntime, if any, nor its native library is loaded. The
`onnxexec as-onnxruntime` command runs its program with this hook installed through
a sitecustomize on PYTHONPATH (it works for subprocesses started with the same
environment too). Nothing happens at import of this module: only `install()` or
running it as a program installs the hook.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
from types import ModuleType
from typing import Any

# onnxruntime module name -> the onnxexec module that stands for it
ALIASES = {
    "onnxruntime": "onnxexec.capi.ort_module",
    "onnxruntime.capi": "onnxexec.capi",
    "onnxruntime.capi.onnxruntime_pybind11_state": "onnxexec.capi.onnxruntime_pybind11_state",
    "onnxruntime.capi._pybind_state": "onnxexec.capi._pybind_state",
    "onnxruntime.capi.onnxruntime_inference_collection": (
        "onnxexec.capi.onnxruntime_inference_collection"
    ),
    "onnxruntime.backend": "onnxexec.backend",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system gave the module the alias' spec: give it back its own, so
        # reload() and pickling by module name still find onnxexec's module
        module.__spec__ = self._own_spec


class OnnxruntimeFinder(importlib.abc.MetaPathFinder):
    """Finds onnxexec's modules for onnxruntime's names (see ALIASES)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        alias = ALIASES.get(fullname)
        if alias is None:
            if fullname.startswith("onnxruntime."):
                raise ModuleNotFoundError(
                    f"No module named '{fullname}': onnxexec stands in for onnxruntime's "
                    f"Python API ({', '.join(sorted(ALIASES))}), not for this submodule",
                    name=fullname,
                )
            return None
        is_pkg = fullname in ("onnxruntime", "onnxruntime.capi")
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(alias), is_package=is_pkg)


def install() -> None:
    """Make `import onnxruntime` (and its capi modules) import onnxexec from now on."""
    if any(isinstance(f, OnnxruntimeFinder) for f in sys.meta_path):
        return
    for name in [n for n in sys.modules if n == "onnxruntime" or n.startswith("onnxruntime.")]:
        del sys.modules[name]  # an onnxruntime imported earlier would keep being used
    sys.meta_path.insert(0, OnnxruntimeFinder())


USAGE = "usage: python -m onnxexec.as_onnxruntime (script.py | -m module) [args...]"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stderr.write(USAGE + "\n")
        return 2
    install()
    if args[0] == "-m":
        if len(args) < 2:
            sys.stderr.write(USAGE + "\n")
            return 2
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
