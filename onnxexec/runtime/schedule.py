"""A plan compiled to a flat schedule: the executor's fast path reads one tuple per
step with everything resolved ahead of time (the "thunk executor" idea of RLX).

Per step: the handler, the number of inputs and the first two input slots (one and two
inputs are called spelled out: a comprehension costs more than most tiny ops), every
input slot, the keyword arguments (None when there are none, so the call skips `**`),
the output slot when the node has exactly one, the slots that die after it, the
compiled bodies of its subgraphs, the Step itself (errors, debug, profiling) and the
direct float32 call of a tiny elementwise op (fastpath.py; None for the others).

A Constant node's value is computed here once and pre-placed in the plan's slot
template, as an initializer is, when the handler hands back memory the node's
attributes hold (so output ownership already treats it as the session's): the node
then takes no step of the schedule.

A body is compiled once with its parent: its plan, where each outer-scope value it
reads comes from in the parent's slots, its positional input slots and its outputs.
Running it copies the body's slot template and fills it straight from the parent's
slots: no per-call planning, name lookups or dictionaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from onnxexec.runtime.fastpath import fast_fn
from onnxexec.runtime.ownership import memory_root

if TYPE_CHECKING:
    from onnxexec.runtime.plan import GraphPlan, Step

# (fn, n_in, i0, i1, ins, kwargs | None, out, free, bodies | None, step, fast | None)
Entry = tuple[Any, ...]


@dataclass(frozen=True)
class Body:
    """A subgraph compiled for its parent step."""

    plan: GraphPlan
    schedule: list[Entry]
    outer: tuple[tuple[int, int], ...]  # (slot in the body, slot in the parent)
    inputs: tuple[int, ...]  # body slots of its positional inputs
    outputs: tuple[int, ...]


def _body(step: Step, sub: GraphPlan) -> Body:
    parent = dict(step.implicit)
    # Outer values first: a body input of the same name shares the slot and, written
    # after them, shadows the outer value (ONNX scoping).
    outer = tuple((s, parent[name]) for name, s in sub.outer_slots.items())
    return Body(sub, schedule_of(sub), outer, tuple(sub.input_slots.values()), sub.output_slots)


def _entry(step: Step) -> Entry:
    ins = step.ins
    first, second = (*ins, -1, -1)[:2]
    single = step.outs[0] if len(step.outs) == 1 else -1
    bodies = schedule_of_step(step) if "run_graph" in step.handler.wants else None
    # kwargs stays the Step's own dict object (ownership.py reads the same values)
    kwargs = step.kwargs if step.kwargs or bodies is not None else None
    fast = fast_fn(step.handler, len(ins), kwargs) if single >= 0 else None
    if fast is not None and min(ins) < 0:  # an omitted input: the handler decides
        fast = None
    fn = step.handler.fn
    return (fn, len(ins), first, second, ins, kwargs, single, step.free, bodies, step, fast)


def _held_constant(step: Step) -> Any:
    """A Constant node's value when it is an array its attributes hold, else None."""
    if step.node.op_type != "Constant" or step.node.domain or step.ins or len(step.outs) != 1:
        return None
    try:
        v = step.handler.fn(**step.kwargs)
    except Exception:  # reported by the node's own step when it runs
        return None
    held = {id(memory_root(a)) for a in step.kwargs.values() if isinstance(a, np.ndarray)}
    if isinstance(v, np.ndarray) and id(memory_root(v)) in held:
        return v
    return None


def schedule_of_step(step: Step) -> dict[int, Body]:
    """The compiled bodies of `step`'s subgraphs (id(Graph) -> Body), built once."""
    bodies = step.bodies
    if bodies is None:
        bodies = step.bodies = {key: _body(step, sub) for key, sub in step.subplans.items()}
    return bodies


def schedule_of(plan: GraphPlan) -> list[Entry]:
    """`plan`'s compiled schedule, built on first use and kept on the plan. It may
    pre-place constants in `plan.template`: copy the template after calling this."""
    sched = plan.schedule
    if sched is None:
        sched = []
        fed = {*plan.input_slots.values(), *plan.outer_slots.values()}
        for st in plan.steps:
            v = _held_constant(st)
            # pre-placed only when no feed, outer value or initializer has that slot
            s = st.outs[0]
            if v is not None and s >= 0 and plan.template[s] is None and s not in fed:
                plan.template[st.outs[0]] = v
                continue
            sched.append(_entry(st))
        plan.schedule = sched = _rank_constants(plan, sched, fed)
    return sched


def _rank_constants(plan: GraphPlan, sched: list[Entry], fed: set[int]) -> list[Entry]:
    """Binary fast calls with a constant operand of lower rank (an [H] bias added to a
    [1, H] activation) get the constant reshaped to the other operand's rank: the same
    broadcast result, but numpy's equal-shape loop costs a third of its broadcasting
    one on a tiny tensor (~1 us against ~3 us measured on [1, 64] float32). Whether the
    ranks differ is known at the first call: where they do not, the entry goes back to
    the plain ufunc then (the wrapper costs ~0.5 us)."""
    out: list[Entry] = []
    for e in sched:
        fast, i0, i1 = e[10], e[2], e[3]
        if fast is not None and e[1] == 2 and isinstance(fast, np.ufunc):
            for k, s in ((1, i1), (0, i0)):
                c = plan.template[s]
                if s not in fed and type(c) is np.ndarray and c.ndim >= 1:
                    e = (*e[:10], _ranked(fast, c, k == 1, out, len(out)))
                    break
        out.append(e)
    return out


def _ranked(ufunc: np.ufunc, const: np.ndarray, second: bool, sched: list, at: int) -> Any:
    """`ufunc` with `const` (the operand on that side while it is that very array)
    left-padded with 1s to the other operand's rank, the padded views kept per rank;
    `sched[at]` is its entry, reset to the plain ufunc when no padding is needed."""
    views: dict[int, np.ndarray] = {}

    def call(a: np.ndarray, b: np.ndarray) -> Any:
        x, c = (a, b) if second else (b, a)
        if c is not const:
            return ufunc(a, b)
        v = views.get(x.ndim)
        if v is None:
            if x.ndim <= c.ndim and not views:  # equal ranks from the first call on
                sched[at] = (*sched[at][:10], ufunc)
                return ufunc(a, b)
            pad = max(x.ndim - c.ndim, 0)
            v = views[x.ndim] = c.reshape((1,) * pad + c.shape)
        return ufunc(x, v) if second else ufunc(v, x)

    return call
