"""Run a GraphPlan: a loop over prepared steps that drops values after last use."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from onnxexec.errors import NodeExecutionError, OnnxExecError
from onnxexec.ir.graph import Graph
from onnxexec.ops.control_flow import if_
from onnxexec.ops.elementwise import FP_QUIET
from onnxexec.runtime import shape_check
from onnxexec.runtime.fastpath import F32
from onnxexec.runtime.plan import GraphPlan, Step
from onnxexec.runtime.schedule import Body, Entry, schedule_of, schedule_of_step
from onnxexec.runtime.threads import begin_run, end_run

log = logging.getLogger("onnxexec")


def _debug_level() -> int:
    try:
        return int(os.environ.get("ONNXEXEC_DEBUG", "0"))
    except ValueError:
        return 0


def describe(v: Any) -> str:
    """'float32[2, 3]' for arrays, 'seq(len=2)' for lists, 'None' for absent values."""
    if v is None:
        return "None"
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)}"
    if isinstance(v, list):
        return f"seq(len={len(v)})"
    if isinstance(v, dict):
        return f"map(len={len(v)})"
    return type(v).__name__


def _run_body(bodies: dict[int, Body], vals: list[Any], graph: Graph, *inputs: Any) -> list[Any]:
    """`run_graph` for control-flow handlers: one body compiled with its parent step,
    its slots filled straight from the parent's (see schedule.py)."""
    body = bodies[id(graph)]
    bvals = body.plan.template.copy()
    bvals.append(None)  # omitted inputs (slot -1) read this
    for dst, src in body.outer:
        bvals[dst] = vals[src]
    for slot, v in zip(body.inputs, inputs, strict=False):
        bvals[slot] = v
    if log.isEnabledFor(logging.DEBUG) and _debug_level():
        _run_instrumented(body.plan, bvals, _debug_level(), None)
    else:
        _run(body.schedule, bvals)
    return [bvals[s] for s in body.outputs]


def _run_branch(body: Body, vals: list[Any]) -> tuple[Any, ...]:
    """An If branch run in the parent's loop (no run_graph closure, no handler call):
    what ops/control_flow.if_ does through `_run_body`."""
    bvals = body.plan.template.copy()
    bvals.append(None)
    for dst, src in body.outer:
        bvals[dst] = vals[src]
    _run(body.schedule, bvals)
    return tuple([bvals[s] for s in body.outputs])


def _call(step: Step, vals: list[Any]) -> Any:
    args = [vals[s] if s >= 0 else None for s in step.ins]
    kwargs = step.kwargs
    if "run_graph" in step.handler.wants:
        bodies = schedule_of_step(step)
        kwargs = dict(kwargs, run_graph=partial(_run_body, bodies, vals))
    return step.handler.fn(*args, **kwargs)


def _store(step: Step, vals: list[Any], result: Any) -> None:
    outs = step.outs
    if len(outs) == 1:
        if isinstance(result, tuple):
            result = result[0]
        if outs[0] >= 0:
            vals[outs[0]] = result
        return
    if not isinstance(result, tuple):
        result = (result,)
    for s, r in zip(outs, result, strict=False):
        if s >= 0:
            vals[s] = r
    if len(result) < len(outs) and any(s >= 0 for s in outs[len(result) :]):
        raise OnnxExecError(f"handler returned {len(result)} outputs, node declares {len(outs)}")


def _fail(step: Step, vals: list[Any], e: Exception) -> NodeExecutionError:
    shapes = ", ".join(describe(vals[s]) if s >= 0 else "None" for s in step.ins)
    n = step.node
    dom = f"{n.domain}::" if n.domain else ""
    msg = f"{type(e).__name__}: {e}" if not isinstance(e, NodeExecutionError) else str(e)
    return NodeExecutionError(
        f"While executing node '{n.label}' ({dom}{n.op_type}, opset {step.opset}) "
        f"with inputs ({shapes}): {msg}"
    )


def execute(
    plan: GraphPlan, inputs: Any, outer: Mapping[str, Any] | None = None, profiler: Any = None
) -> list[Any]:
    """Run `plan`. `inputs` is positional (subgraphs) or a name->value mapping."""
    schedule = schedule_of(plan)  # first: it may pre-place constants in the template
    vals = plan.template.copy()
    # A trailing None slot: an omitted input (slot -1) reads it as vals[-1].
    vals.append(None)
    if type(inputs) is dict or isinstance(inputs, Mapping):
        slots = plan.input_slots
        for name, v in inputs.items():
            vals[slots[name]] = v
    else:
        for slot, v in zip(plan.input_slots.values(), inputs, strict=False):
            vals[slot] = v
    if outer:
        for name, s in plan.outer_slots.items():
            vals[s] = outer[name]
    # Debug logging only shows when the "onnxexec" logger takes DEBUG records.
    debug = _debug_level() if log.isEnabledFor(logging.DEBUG) else 0
    check = shape_check.checker_for(plan) if outer is None and shape_check.enabled() else None
    run = begin_run()
    # One errstate for the whole run (ONNX arithmetic never warns); handlers see
    # FP_QUIET and skip their own, which cost more than a tiny op.
    quiet = FP_QUIET.set(True)
    try:
        with np.errstate(all="ignore"):
            if debug or profiler is not None or check is not None:
                _run_instrumented(plan, vals, debug, profiler, check)
            else:
                _run(schedule, vals)
    finally:
        FP_QUIET.reset(quiet)
        end_run(run)
    return [vals[s] for s in plan.output_slots]


def _run(schedule: list[Entry], vals: list[Any]) -> None:
    """The plain loop over a compiled schedule: call, store, drop dead values. One try
    around all steps (free in CPython 3.11+); a failure is reported against the step
    that raised.

    A step with a direct float32 call (fastpath.py) takes it when its inputs are
    float32 ndarrays: the type and dtype checks cost less than the handler's wrapping.
    An If with a one-element ndarray condition runs its branch's schedule here.
    """
    nd = np.ndarray
    f32 = F32
    asarray = np.asarray
    step: Step | None = None
    try:
        for fn, n_in, i0, i1, ins, kwargs, out, free, bodies, step, fast in schedule:
            if fast is not None:
                a = vals[i0]
                if type(a) is nd and a.dtype is f32:
                    if n_in == 1:
                        result = fast(a)
                    else:
                        b = vals[i1]
                        result = fast(a, b) if type(b) is nd and b.dtype is f32 else None
                    if result is not None:
                        # a 0-d result comes back as a numpy scalar (elementwise.narrow)
                        vals[out] = result if type(result) is nd else asarray(result)
                        for s in free:
                            vals[s] = None
                        continue
            if kwargs is None:
                if n_in == 1:
                    result = fn(vals[i0])
                elif n_in == 2:
                    result = fn(vals[i0], vals[i1])
                else:
                    result = fn(*[vals[s] for s in ins])
            else:
                if bodies is not None:
                    if fn is if_:
                        c = vals[i0]
                        if type(c) is nd and c.size == 1:  # else the handler decides
                            branch = kwargs["then_branch"] if c else kwargs["else_branch"]
                            _store(step, vals, _run_branch(bodies[id(branch)], vals))
                            for s in free:
                                vals[s] = None
                            continue
                    kwargs = dict(kwargs, run_graph=partial(_run_body, bodies, vals))
                if n_in == 1:
                    result = fn(vals[i0], **kwargs)
                elif n_in == 2:
                    result = fn(vals[i0], vals[i1], **kwargs)
                else:
                    result = fn(*[vals[s] for s in ins], **kwargs)
            if out >= 0 and type(result) is not tuple:
                vals[out] = result
            else:
                _store(step, vals, result)
            for s in free:
                vals[s] = None
    except Exception as e:
        if step is None:
            raise
        raise _fail(step, vals, e) from e


def _run_instrumented(
    plan: GraphPlan,
    vals: list[Any],
    debug: int,
    profiler: Any,
    check: shape_check.Checker | None = None,
) -> None:
    for step in plan.steps:
        n = step.node
        if debug >= 2:
            ins = ", ".join(describe(vals[s]) if s >= 0 else "None" for s in step.ins)
            log.debug("%s (%s) <- %s", n.label, n.op_type, ins)
        elif debug:
            log.debug("%s (%s)", n.label, n.op_type)
        try:
            if profiler is not None:
                with profiler.node(step, vals):
                    _store(step, vals, _call(step, vals))
            else:
                _store(step, vals, _call(step, vals))
            if check is not None:  # ONNXEXEC_CHECK_SHAPES: inferred == produced
                check(step, vals)
        except Exception as e:
            raise _fail(step, vals, e) from e
        if debug >= 2:
            outs = ", ".join(describe(vals[s]) if s >= 0 else "None" for s in step.outs)
            log.debug("  -> %s", outs)
        for s in step.free:
            vals[s] = None
