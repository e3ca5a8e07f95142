"""Debug mode: assert that every value's statically inferred shape and element type
(passes/shape_inference.py, on the graph as optimized) are what the run produces.

Enabled by the environment variable ONNXEXEC_CHECK_SHAPES=1 (read at each run, so a
test can turn it on for a block). A mismatch raises ShapeCheckError naming the value,
and the executor reports it against the node that produced it. The optimizer trusts
these shapes (fold_shapes turns Shape nodes into constants, fusions check broadcasts),
so a wrong rule is a wrong result waiting to happen: the differential tests run with
this on. Only the top-level graph is checked; a subgraph's declared input shapes are
not validated against what its parent passes.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.errors import OnnxExecError
from onnxexec.ir.dtypes import onnx_dtype
from onnxexec.passes import symdim
from onnxexec.passes.shape_inference import Facts, infer_shapes

ENV = "ONNXEXEC_CHECK_SHAPES"
Checker = Callable[[Any, list[Any]], None]  # (step, slot values) after the step ran


class ShapeCheckError(OnnxExecError):
    """A value's produced shape or dtype is not the one shape inference promised."""


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


# by id(plan): its inferred facts, inferred once (plans are unhashable dataclasses); an
# entry goes with its plan
_FACTS: dict[int, tuple[weakref.ref, dict[str, Facts]]] = {}


def _facts(plan: Any) -> dict[str, Facts]:
    hit = _FACTS.get(id(plan))
    if hit is not None and hit[0]() is plan:
        return hit[1]
    facts = infer_shapes(plan.graph)
    _FACTS[id(plan)] = (weakref.ref(plan), facts)
    weakref.finalize(plan, _FACTS.pop, id(plan), None)
    return facts


def checker_for(plan: Any) -> Checker:
    """A checker over `plan`'s graph, with fresh bindings of its symbolic dims (one run)."""
    facts = _facts(plan)
    names = plan.slot_names
    bound: dict[str, int] = {}

    def check(step: Any, vals: list[Any]) -> None:
        for s in step.outs:
            if s >= 0 and isinstance(vals[s], np.ndarray):
                f = facts.get(names[s])
                if f is not None:
                    _check_value(names[s], f, vals[s], bound)

    return check


def _dtype_elem(a: np.ndarray) -> int | None:
    try:
        return onnx_dtype(a.dtype)
    except ValueError:
        return None


def _check_value(name: str, f: Facts, a: np.ndarray, bound: dict[str, int]) -> None:
    elem = _dtype_elem(a)
    if f.elem is not None and elem is not None and f.elem != elem:
        raise ShapeCheckError(f"value '{name}': inferred element type {f.elem}, produced {a.dtype}")
    if f.shape is None:
        return
    if len(f.shape) != a.ndim or not all(
        _dim_ok(d, int(n), bound) for d, n in zip(f.shape, a.shape, strict=True)
    ):
        raise ShapeCheckError(
            f"value '{name}': inferred shape {list(f.shape)}, produced {a.dtype}{list(a.shape)}"
        )


def _dim_ok(d: symdim.Dim, n: int, bound: dict[str, int]) -> bool:
    """Whether dim `d` (an int or a product of symbols) can be `n`, binding the symbols
    seen for the first time (a symbol stands for one size in the whole run)."""
    if isinstance(d, int):
        return d == n
    coef, factors = symdim.factors(d)
    known = coef
    free = []
    for f in factors:
        if f in bound:
            known *= bound[f]
        else:
            free.append(f)
    if not free:
        return known == n
    if len(free) == 1 and known and n % known == 0:
        bound[free[0]] = n // known
        return True
    if d in bound:
        return bound[d] == n
    bound[d] = n  # several unknown factors: the product itself stands for one size
    return True
