"""Which kernel sources a compiled kernel depends on: its module and every module of
onnxexec.kernels / onnxexec.native it imports, transitively (a static import graph).

numba compiles a kernel together with the jitted functions it calls (they are inlined
or linked into its object code), and those can only come from modules its module
imports. So a stored kernel is keyed on `digest(module)`: the sha256 of its module's
import closure. Editing one kernel module recompiles the kernels of that module and of
the modules that import it, directly or not; every other record stays valid.

The graph is read from the files with `ast` (nothing is imported or run), once per
process. It is conservative where Python is ambiguous: `from pkg import name` counts
both `pkg/__init__.py` and `pkg/name.py`, an import inside a function counts like a
top-level one, and each module's parent packages (`kernels/__init__.py`,
`kernels/quant/__init__.py`, ...) are in its closure since importing it runs them.
objload/ (this loader) and cachedir.py (where the store is) are in no closure: they
don't change compiled code.
A module outside both packages (a test's kernel) gets its own file's closure; one
with no readable file gets `kernels.sources_digest()` (every kernel source).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import sys
from typing import Final

_PACKAGES: Final = ("onnxexec.kernels", "onnxexec.native")
# the loader and the store's location decide nothing a compiled kernel contains
_SKIP: Final = ("onnxexec.kernels.objload", "onnxexec.kernels.cachedir")
_ONNXEXEC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_scope(name: str) -> bool:
    if any(name == s or name.startswith(s + ".") for s in _SKIP):
        return False
    return any(name == p or name.startswith(p + ".") for p in _PACKAGES)


@functools.cache
def module_files() -> dict[str, str]:
    """Dotted module name -> file, for every module of kernels/ (but objload/) and
    native/."""
    root = os.path.dirname(_ONNXEXEC)
    found: dict[str, str] = {}
    for package in _PACKAGES:
        top = os.path.join(root, *package.split("."))
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(folder, root).replace(os.sep, ".")
            for name in files:
                if not name.endswith(".py"):
                    continue
                dotted = rel if name == "__init__.py" else f"{rel}.{name[:-3]}"
                if _in_scope(dotted):
                    found[dotted] = os.path.join(folder, name)
    return found


def _resolve(package: str, level: int, module: str | None) -> str:
    """The absolute name of `from <level dots><module> import ...` in `package`."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - level + 1] if level > 1 else parts
    return ".".join(base + ([module] if module else []))


def imported_names(path: str, name: str, is_package: bool) -> set[str]:
    """Every module name the file at `path` (module `name`) may import."""
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), filename=path)
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(package, node.level, node.module)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def _with_parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


@functools.cache
def _edges(name: str) -> frozenset[str]:
    files = module_files()
    path = files[name]
    deps: set[str] = set()
    for imported in imported_names(path, name, path.endswith("__init__.py")):
        deps |= {m for m in _with_parents(imported) if m in files}
    deps |= {m for m in _with_parents(name) if m in files}
    deps.discard(name)
    return frozenset(deps)


def closure(name: str, path: str | None = None) -> list[str]:
    """The files module `name` depends on (its own first when it is outside the
    graph), sorted after that; [] when it has no readable file."""
    files = module_files()
    if name not in files:
        if path is None or not os.path.isfile(path):
            return []
        start = {m for imp in imported_names(path, name, False) for m in _with_parents(imp)}
        todo = [m for m in start if m in files]
        own = [path]
    else:
        todo, own = [name], []
    seen: set[str] = set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(_edges(current) - seen)
    return own + sorted(files[m] for m in seen)


def _module_path(name: str) -> str | None:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if path:
        return str(path)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.has_location else None


@functools.cache
def digest(name: str) -> str:
    """sha256 (hex) of module `name`'s import closure: file names and contents."""
    files = closure(name, None if name in module_files() else _module_path(name))
    if not files:
        from onnxexec.kernels import sources_digest

        return sources_digest()
    h = hashlib.sha256()
    for path in files:
        rel = os.path.relpath(path, _ONNXEXEC).replace(os.sep, "/")
        with open(path, "rb") as f:
            h.update(rel.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def module_of(kernel: str) -> str:
    """The module of a kernel's qualified name ("pkg.mod.f" or "pkg.mod.Cls.f"): the
    longest imported or known prefix, else everything before the last dot."""
    parts = kernel.split(".")
    files = module_files()
    for i in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in sys.modules or prefix in files:
            return prefix
    return kernel.rpartition(".")[0]


def current_digests() -> set[str]:
    """The digests of every module in the graph: a folder named by another one holds
    only records no current kernel reads (`cache clear --stale` removes it)."""
    from onnxexec.kernels import sources_digest

    return {digest(m) for m in module_files()} | {sources_digest()}
