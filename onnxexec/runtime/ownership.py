"""Outputs belong to the caller: never the caller's own input array, never memory the
session keeps (initializers, folded constants, Constant-node attributes), never
another output of the same run.

Most handlers return fresh arrays; Identity, Reshape, Squeeze, Split, Transpose,
a graph input listed as an output, an output that is an initializer... return views
of memory that outlives the run. Copying every output would cost every model a pass
over its outputs, so only an output whose memory root (the end of its `.base` chain)
is one the session or the feeds hold is copied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from onnxexec.runtime.plan import GraphPlan


def memory_root(a: Any) -> Any:
    """The object owning `a`'s memory: numpy keeps `.base` pointing at the owning array
    or at a buffer object (bytes, mmap, memoryview); views of views collapse onto it."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def _arrays(v: Any) -> Iterable[np.ndarray]:
    if isinstance(v, np.ndarray):
        yield v
    elif isinstance(v, list | tuple):
        # ONNX values and attributes are homogeneous: a tuple of ints holds no array
        if v and isinstance(v[0], np.ndarray | list | tuple | dict):
            for x in v:
                yield from _arrays(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _arrays(x)


def _held_arrays(plan: GraphPlan) -> Iterable[np.ndarray]:
    """Every array `plan` keeps across runs: pre-placed constants and array-valued
    attributes (a Constant node returns its `value`), nested plans included."""
    values = [*plan.template]
    for step in plan.steps:
        values.extend(step.kwargs.values())
    for v in values:
        # most slots are empty and most attributes numbers: no generator for those
        if isinstance(v, np.ndarray):
            yield v
        elif isinstance(v, list | tuple | dict):
            yield from _arrays(v)
    for step in plan.steps:
        for sub in step.subplans.values():
            yield from _held_arrays(sub)


class OutputOwnership:
    """Made once per plan; `__call__` gives a run's outputs back, copying those that
    share memory with a feed, with the session, or with an earlier output."""

    def __init__(self, plan: GraphPlan) -> None:
        # ids stay valid: the plan keeps every root alive as long as this object lives
        self._held = {id(memory_root(a)) for a in _held_arrays(plan)}

    def __call__(self, results: list[Any], feeds: Mapping[str, Any]) -> list[Any]:
        fed = {id(memory_root(a)) for v in feeds.values() for a in _arrays(v)}
        given: dict[int, list[np.ndarray]] = {}  # root id -> outputs handed out so far
        out = []
        for r in results:
            if isinstance(r, np.ndarray):
                r = self._owned(r, fed, given)
            elif isinstance(r, list) and any(isinstance(x, np.ndarray) for x in r):
                # a sequence output (SequenceConstruct of a feed holds the feed itself)
                r = [self._owned(x, fed, given) if isinstance(x, np.ndarray) else x for x in r]
            out.append(r)
        return out

    def _owned(self, r: np.ndarray, fed: set[int], given: dict[int, list[np.ndarray]]) -> Any:
        root = id(memory_root(r))
        earlier = given.setdefault(root, [])
        # Split's outputs are disjoint views of one fresh array: only overlap counts
        if root in self._held or root in fed or any(np.may_share_memory(r, e) for e in earlier):
            r = r.copy()
            earlier = given.setdefault(id(r), [])
        earlier.append(r)
        return r
