"""Op handler registry keyed by (domain, op_type, since_version).

A handler's signature is the spec: inputs positional (None for an omitted optional
input), attributes keyword-only with the spec default in the signature. Anything
else a handler needs from the executor it names in `wants`:

- "num_outputs": int, how many outputs the node declares (trailing omitted ones kept)
- "outputs_used": tuple[bool, ...], which outputs the graph actually consumes
- "run_graph": callable(graph, *inputs) -> list, runs a subgraph attribute with the
  enclosing scope's values visible (If, Loop, Scan, SequenceMap...)
- "opset": int, the model's opset for the handler's domain

State a handler keeps between runs of one node (packed weights, recorded replays,
cached geometry) comes from its `prepare` hook, not from module globals:
`@op(..., prepare=fn)` calls `fn(consts, attrs)` once when the node is planned, with
`consts` the node's inputs that are graph constants (None for the others) and `attrs`
its bound attributes; the result is owned by the plan's step, passed to the handler as
the keyword `prepared` on every run and freed with the plan (the session). A handler
called outside a plan gets `prepared=None` and must work without it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onnxexec.ir.graph import canonical_domain
from onnxexec.ops._families import FAMILIES

WANTS = frozenset({"num_outputs", "outputs_used", "run_graph", "opset"})


@dataclass(frozen=True)
class Handler:
    op_type: str
    domain: str
    since: int
    fn: Callable[..., Any]
    wants: tuple[str, ...]
    attributes: frozenset[str]
    required_attributes: frozenset[str]
    accepts_any_attribute: bool
    # how many inputs the signature takes (None: *args), for ops of domains onnx ships
    # no schema for (com.microsoft...), whose arity the plan checks against this
    max_inputs: int | None = None
    prepare: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None = None

    @property
    def qualname(self) -> str:
        d = f"{self.domain}::" if self.domain else ""
        return f"{d}{self.op_type}-{self.since}"


_REGISTRY: dict[tuple[str, str], list[Handler]] = {}


def op(
    op_type: str,
    since: int,
    domain: str = "",
    wants: tuple[str, ...] = (),
    prepare: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None = None,
) -> Callable:
    """Register `fn` as the handler for (domain, op_type) from opset `since` on;
    `prepare` makes the per-node state it receives as `prepared` (module docstring)."""
    unknown = set(wants) - WANTS
    if unknown:
        raise ValueError(f"{op_type}-{since}: unknown wants {sorted(unknown)}")

    def register(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        kw = {p.name: p for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY}
        if prepare is not None and "prepared" not in kw:
            raise ValueError(f"{op_type}-{since}: a prepare hook needs a `prepared` keyword")
        hidden = {*wants, "prepared"} if prepare is not None else set(wants)
        attrs = frozenset(k for k in kw if k not in hidden)
        required = frozenset(k for k in attrs if kw[k].default is inspect.Parameter.empty)
        var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        kinds = [p.kind for p in sig.parameters.values()]
        positional = sum(
            k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for k in kinds
        )
        max_inputs = None if inspect.Parameter.VAR_POSITIONAL in kinds else positional
        dom = canonical_domain(domain)
        h = Handler(
            op_type, dom, since, fn, tuple(wants), attrs, required, var_kw, max_inputs, prepare
        )
        versions = _REGISTRY.setdefault((dom, op_type), [])
        if any(v.since == since for v in versions):
            raise ValueError(f"duplicate handler for {h.qualname}")
        versions.append(h)
        versions.sort(key=lambda v: v.since)
        return fn

    return register


def resolve(domain: str, op_type: str, opset: int) -> Handler | None:
    """Handler with the largest `since` <= opset, or None."""
    key = (canonical_domain(domain), op_type)
    if key not in _family_keys and not _loaded:
        family = FAMILIES.get(key[0], {}).get(op_type)
        if family is not None:
            load_families(family)
        if key not in _family_keys:
            _ensure_loaded()
    best = None
    for h in _REGISTRY.get(key, ()):
        if h.since <= opset:
            best = h
    return best


def versions(domain: str, op_type: str) -> list[int]:
    _ensure_loaded()
    return [h.since for h in _REGISTRY.get((canonical_domain(domain), op_type), ())]


def all_handlers() -> list[Handler]:
    _ensure_loaded()
    return [h for hs in _REGISTRY.values() for h in hs]


_loaded = False
# ops registered by the families load_families imported (every version of each)
_family_keys: set[tuple[str, str]] = set()


def family_index_source() -> str:
    """ops/_families.py as a full load of every family gives it (its test compares)."""
    _ensure_loaded()
    by_domain: dict[str, dict[str, str]] = {}
    prefix = f"{__package__}."
    for (dom, op_type), hs in sorted(_REGISTRY.items()):
        # modules of subpackages keep their dotted path ("contrib.normalization");
        # ops a test or a user registered live outside onnxexec.ops and are left out
        module = hs[0].fn.__module__
        if module.startswith(prefix):
            by_domain.setdefault(dom, {})[op_type] = module.removeprefix(prefix)
    lines = [
        '"""Which module of onnxexec.ops registers each op: domain -> op_type -> module.',
        "",
        "Generated by registry.family_index_source() from a full load (tests/unit/ops/",
        "test_registry_families.py checks it). A session resolving an op imports just its",
        "module; an op missing here makes the lookup import every family, as before.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Final",
        "",
        "FAMILIES: Final[dict[str, dict[str, str]]] = {",
    ]
    for dom, ops in by_domain.items():
        lines.append(f"    {dom!r}: {{")
        lines += [f"        {k!r}: {v!r}," for k, v in ops.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines).replace("'", '"') + "\n"


def load_families(*names: str) -> None:
    """Import just these op families (modules of onnxexec.ops, e.g. "llm" or
    "contrib.attention"): lookups of
    the ops they register then skip importing every other family (~0.3 s, most of
    which a GGUF model never uses). One module holds every version of its ops (no op
    is split across families), so the answer is the one a full load gives; any other
    op still loads everything on first lookup."""
    import importlib

    mods = {f"{__package__}.{n}" for n in names}
    for m in sorted(mods):
        importlib.import_module(m)
    for key, hs in _REGISTRY.items():
        if all(h.fn.__module__ in mods for h in hs):
            _family_keys.add(key)


def _ensure_loaded() -> None:
    """Import every module of onnxexec.ops once so their @op decorators run."""
    global _loaded
    if _loaded:
        return
    import importlib
    import pkgutil

    import onnxexec.ops as pkg

    # Mark loaded only once every family imported: a module that fails to import
    # raises here (and again on the next lookup) instead of leaving a half-filled
    # registry that reports its ops as unsupported.
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if not info.name.endswith((".registry", ".common")):
            importlib.import_module(info.name)
    _loaded = True
