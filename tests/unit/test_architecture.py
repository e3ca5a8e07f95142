"""The package's shape: module size budget and the one-way dependency rule.

STYLE.md: modules stay small (CI fails one over 600 lines) and dependencies point one
way, cli -> llm/runtime -> ops -> kernels, with loaders producing only IR. Every
subpackage and top-level module of onnxexec has a rule, so a new one must be placed in
the order before it can land. These checks read the source with `ast`, so they import
nothing and take milliseconds.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "onnxexec"
MAX_LINES = 600

# layer -> onnxexec modules it may import (its own subpackage is always allowed). A layer
# is a subpackage (`ops`) or a top-level module by name (`errors`).
# `passes` is the optimizer (ONNX graph rewrites and the LLM block fusions): constant
# folding runs op handlers and fusions name the kernels they lower to, so it sits above
# ops and below runtime/llm; the IR core (`ir`) imports none of ops, kernels, passes.
BOTTOM = {"errors"}  # the exception classes every layer raises
TOOLS = {"conformance", "benchmark", "as_onnxruntime", "ray"}  # what CLI commands wrap
# kernels/ by subsystem, bottom-up. `kernels` is its top level (isa, bounds, cachedir,
# intrinsics, the numba setup in __init__); `kernels.objload` runs cached kernels
# without numba; `native` is the thread pool the kernels post their jobs to, and
# `kernels.span_fns` the table of the span kernels the pool's workers call.
# `kernels.tuning` is the table of path thresholds: plain integers, importing nothing,
# so every layer may read it (each kernel layer's set gets it below).
KERNEL_RULES: dict[str, set[str]] = {
    "kernels.tuning": set(),
    # objload reads the store's folders and digest from the top level, which hooks
    # objload into numba's import (a function-level import): KNOWN_CYCLES
    "kernels": {"kernels.objload"},
    "kernels.objload": {"kernels"},
    "kernels.ml": {"kernels.objload"},
    "kernels.math": {"kernels", "kernels.objload", "native"},
    "kernels.quant": {"kernels", "kernels.math"},
    "kernels.linalg": {"kernels", "kernels.objload", "kernels.math", "native"},
    "kernels.conv": {"kernels", "kernels.objload", "kernels.math", "kernels.linalg", "native"},
    "kernels.attn": {
        "kernels", "kernels.objload", "kernels.math", "kernels.linalg", "kernels.quant",
        "native",
    },
    "kernels.span_fns": {
        "kernels", "kernels.objload", "kernels.linalg", "kernels.conv", "kernels.attn",
    },
    # the pool: numpy, the stdlib and the bottom layer; its only edge back into the
    # kernel subsystems is the table of span kernels (KNOWN_CYCLES)
    "native": {"kernels", "kernels.objload", "kernels.span_fns"},
}  # fmt: skip
for _name, _deps in KERNEL_RULES.items():
    if _name != "kernels.tuning":
        _deps.add("kernels.tuning")
# layer edges that close a cycle, each a function-level or table lookup
KNOWN_CYCLES = {("kernels", "kernels.objload"), ("native", "kernels.span_fns")}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    **KERNEL_RULES,
    "ops": {"ir", "kernels", "native", *BOTTOM},
    "ir": {*BOTTOM},
    "passes": {"ir", "ops", "kernels", *BOTTOM},
    # ggml_types reads the quant block tables (kernels/quant/qtypes.py is data, no numba)
    "loaders": {"ir", "kernels.quant.qtypes", *BOTTOM},
    "runtime": {"ir", "loaders", "passes", "ops", "kernels", "native", *BOTTOM},
    # LLMs are IR graphs planned and run by the runtime, with their own fused kernels
    "llm": {"runtime", "passes", "ops", "kernels", "ir", "loaders", *BOTTOM},
    # tools above the runtime, reached from the CLI
    "conformance": {"runtime", "ir", "loaders", *BOTTOM},
    "benchmark": {"runtime", "llm", "ops", "ir", "loaders", *BOTTOM},
    # the HTTP server: LLMs and their graphs (embeddings), the runtime (ONNX embedders)
    "serve": {"llm", "runtime", "passes", "ir", *BOTTOM},
    # the optional Ray extra: batch jobs and Serve deployments over sessions and LLMs
    "ray": {"runtime", "llm", "serve", "__init__", *BOTTOM},
    # the command line sits on top; it reaches kernels and ops only through the runtime
    "cli": {*TOOLS, "serve", "llm", "runtime", "ir", "loaders", "__version__", *BOTTOM},
    # the onnxruntime-compatible facades: the package root, its backend, `capi`
    "__init__": {"runtime", *BOTTOM},
    "backend": {"runtime", *BOTTOM},
    "capi": {"runtime", *BOTTOM},
    "as_onnxruntime": {"runtime", "capi", *BOTTOM},
    "__main__": {"cli"},
}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _layer(path: Path) -> str:
    parts = path.relative_to(PKG).parts
    if parts[0] == "kernels" and len(parts) > 2:
        return f"kernels.{parts[1]}"
    if parts[0] == "kernels" and f"kernels.{path.stem}" in KERNEL_RULES:
        return f"kernels.{path.stem}"
    return parts[0] if len(parts) > 1 else path.stem


def _kernel_layer(target: str) -> str:
    """The KERNEL_RULES layer of an imported name below onnxexec (else the name)."""
    parts = target.split(".")
    if parts[0] != "kernels" or len(parts) == 1:
        return parts[0]
    sub = f"kernels.{parts[1]}"
    return sub if (PKG / "kernels" / parts[1]).is_dir() or sub in KERNEL_RULES else "kernels"


def _onnxexec_imports(path: Path) -> set[str]:
    """Dotted names below `onnxexec.` that the module imports (absolute imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from onnxexec.kernels.quant import qtypes` counts as onnxexec.kernels.quant.qtypes
            names = [f"{node.module}.{a.name}" for a in node.names]
        found.update(n.removeprefix("onnxexec.") for n in names if n.startswith("onnxexec."))
    return found


def _allowed(layer: str, target: str) -> bool:
    if layer in KERNEL_RULES:
        found = _kernel_layer(target)
        return found == layer or found in KERNEL_RULES[layer]
    own = layer.split(".")[0]
    if target == own or target.startswith(own + "."):
        return True
    return any(target == a or target.startswith(a + ".") for a in ALLOWED[layer])


def test_every_layer_has_a_rule() -> None:
    """A new subpackage or top-level module must say what it may import."""
    missing = sorted({_layer(p) for p in _modules()} - set(ALLOWED))
    assert not missing, f"add these to ALLOWED: {missing}"


def test_nothing_imports_upward_into_the_cli() -> None:
    """Only the entry point imports the CLI (the rule of every other layer says so too;
    this names the intent)."""
    users = {layer for layer, allowed in ALLOWED.items() if "cli" in allowed}
    assert users == {"__main__"}


def test_modules_within_line_budget() -> None:
    long = {
        str(p.relative_to(PKG)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by family): {long}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_dependencies_point_one_way(layer: str) -> None:
    bad = {
        f"{p.relative_to(PKG)} imports onnxexec.{t}"
        for p in _modules()
        if _layer(p) == layer
        for t in _onnxexec_imports(p)
        if not _allowed(layer, t)
    }
    assert not bad, sorted(bad)


def test_kernels_import_only_numeric_libraries() -> None:
    """kernels/ and native/ are numba and numpy only (plus llvmlite for intrinsics and
    the stdlib)."""
    third_party = {"numpy", "numba", "llvmlite"}
    bad = set()
    for p in _modules():
        if _layer(p) not in KERNEL_RULES:
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                tops = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = {node.module.split(".")[0]}
            else:
                continue
            for top in tops - third_party - {"onnxexec", "__future__"}:
                if top not in sys.stdlib_module_names:
                    bad.add(f"{p.relative_to(PKG)} imports {top}")
    assert not bad, sorted(bad)


def test_kernel_layers_form_a_dag() -> None:
    """Below ops, the kernel subpackages and native/ depend one way once the known
    cycles' edges are set aside (each such edge must still be allowed)."""
    assert all(b in KERNEL_RULES[a] for a, b in KNOWN_CYCLES)
    edges = {a: {b for b in bs if (a, b) not in KNOWN_CYCLES} for a, bs in KERNEL_RULES.items()}
    done: set[str] = set()
    while len(done) < len(edges):
        ready = {a for a, bs in edges.items() if a not in done and bs <= done}
        assert ready, f"cycle among {sorted(set(edges) - done)}"
        done |= ready


def test_kernel_subpackages_import_no_numba_eagerly() -> None:
    """A subpackage's __init__ names its entry points and imports nothing: importing
    one kernel module must not load its neighbours (nor numba)."""
    inits = [*sorted((PKG / "kernels").glob("*/__init__.py")), PKG / "native" / "__init__.py"]
    for init in inits:
        if init.parent.name == "objload":
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{init.relative_to(PKG)}: say its entry points"
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not imports, f"{init.relative_to(PKG)} imports at package level"


def test_checker_sees_a_violation() -> None:
    """The rule itself can fail: an ops module importing the runtime is refused."""
    assert not _allowed("ops", "runtime.session")
    assert not _allowed("kernels", "ops.registry")
    assert not _allowed("ir", "passes.cse")
    assert not _allowed("ir", "ops.registry")
    assert not _allowed("ops", "passes.cse")
    assert not _allowed("passes", "runtime.plan")
    assert _allowed("passes", "ops.registry")
    assert _allowed("runtime", "passes.pipeline")
    assert _allowed("loaders", "kernels.quant.qtypes")
    assert not _allowed("loaders", "kernels.quant.q4")
    assert not _allowed("runtime", "llm.model")
    assert not _allowed("cli", "native.parallel")
    assert not _allowed("errors", "ir.graph")
    assert _layer(PKG / "errors.py") == "errors"
    assert _layer(PKG / "passes" / "dce.py") == "passes"
    assert _layer(PKG / "ir" / "graph.py") == "ir"
    assert _layer(PKG / "kernels" / "conv" / "conv2d.py") == "kernels.conv"
    assert _layer(PKG / "kernels" / "isa.py") == "kernels"
    assert _allowed("kernels.conv", "native.parallel")
    assert _allowed("kernels.conv", "kernels.isa")
    assert not _allowed("kernels.quant", "kernels.conv.conv2d")
    assert not _allowed("kernels.math", "kernels.linalg.gemm")
    assert not _allowed("native", "kernels.conv.conv2d")
    assert not _allowed("kernels", "kernels.conv.conv2d")
    assert not _allowed("kernels.ml", "ops.registry")
    assert _allowed("kernels.ml", "kernels.tuning")
    assert not _allowed("kernels.tuning", "kernels.isa")
    assert _layer(PKG / "kernels" / "tuning.py") == "kernels.tuning"


def _private_imports(source: str, module: str) -> list[str]:
    """`from onnxexec.m import _name` where m is another module, in `source` (the text of
    onnxexec module `module`, dotted, without the `onnxexec.` prefix).

    A leading underscore means "this module's business": a name another module needs is
    an API and gets a public name (issue 27). Allowed: dunders, and a private *module*
    (`ops/_window.py`, `llm/_unicode_tables.py`) imported from inside its own package;
    such a module is the package's shared internals (like CPython's `_collections_abc`),
    so the package is its API boundary, not the file.
    """
    package = module.rsplit(".", 1)[0] if "." in module else ""
    if (PKG / Path(*module.split("."))).is_dir():  # an __init__: its package is itself
        package = module
    bad: list[str] = []

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    def check_module(dotted: str) -> None:
        # a private module `owner._m`: only owner's package and its subpackages reach in
        parts = dotted.split(".")
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            inside = not owner or package == owner or package.startswith(owner + ".")
            if private(part) and not inside:
                bad.append(f"{module} imports private module {dotted}")
                return

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("onnxexec."):
                    check_module(a.name.removeprefix("onnxexec."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level]
                src = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("onnxexec."):
                src = node.module.removeprefix("onnxexec.")
            else:
                continue
            check_module(src)
            is_pkg = (PKG / Path(*src.split("."))).is_dir()
            for a in node.names:
                if not private(a.name) or src == module:
                    continue
                if is_pkg and (PKG / Path(*src.split("."), f"{a.name}.py")).is_file():
                    check_module(f"{src}.{a.name}")  # a private submodule
                else:
                    bad.append(f"{module} imports {a.name} from {src}")
    return bad


def _dotted(path: Path) -> str:
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_private_names_imported_across_modules() -> None:
    bad = [v for p in _modules() for v in _private_imports(p.read_text(), _dotted(p))]
    assert not bad, "\n".join(bad)


def test_private_import_check_sees_a_violation() -> None:
    """The rule can fail: each kind of reach into another module's privates is refused."""
    got = _private_imports("from onnxexec.ops.conv import _pads\n", "ops.pool")
    assert got == ["ops.pool imports _pads from ops.conv"]
    assert _private_imports("from onnxexec.ops import _window\n", "kernels.conv.conv2d")
    assert _private_imports("from onnxexec.ops._window import Geometry\n", "runtime.plan")
    assert _private_imports("import onnxexec.ops._window\n", "llm.model")
    assert _private_imports("from ..conv import _pads\n", "ops.contrib.quant_rnn")
    # allowed: a dunder, a module's own names, its package's private module
    assert not _private_imports("from onnxexec.ops.conv import __all__\n", "ops.pool")
    assert not _private_imports("from onnxexec.ops import _window\n", "ops.pool")
    assert not _private_imports("from onnxexec.ops._window import Geometry\n", "ops.pool")
    assert not _private_imports("from onnxexec.ops import _window\n", "ops.contrib.qconv")
    assert _private_imports("from onnxexec.ops import _window\n", "passes.shape_rules")
