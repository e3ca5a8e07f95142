"""If, Loop and Scan: run Graph attributes through the executor's `run_graph`.

Bodies see the enclosing scope (the planner passes the names they read as implicit
inputs of the node). Loop-carried values may be tensors, sequences (lists) or
absent optionals (None); their shapes may change from one iteration to the next.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.graph import Graph
from onnxexec.ir.types import TensorType
from onnxexec.ops.common import norm_axis
from onnxexec.ops.registry import op

RunGraph = Callable[..., list[Any]]


def _empty_scan_output(graph: Graph, index: int) -> np.ndarray:
    """(0, *elem_shape) for a scan output that no iteration produced.

    The element shape comes from the body's declared output type; unknown dims
    become 0 too, so the result is empty either way.
    """
    t = graph.outputs[index].type
    if isinstance(t, TensorType):
        dims = t.shape or ()
        return np.empty((0, *(d if isinstance(d, int) else 0 for d in dims)), np_dtype(t.elem_type))
    return np.empty((0,), np.float32)


@op("If", since=1, wants=("run_graph",))
def if_(
    cond: np.ndarray, *, then_branch: Graph, else_branch: Graph, run_graph: RunGraph
) -> tuple[Any, ...]:
    """Run one branch; its outputs (tensors, sequences or optionals) are the node's."""
    branch = then_branch if bool(np.asarray(cond).reshape(-1)[0]) else else_branch
    return tuple(run_graph(branch))


@op("Loop", since=1, wants=("run_graph",))
def loop(
    m: np.ndarray | None,
    cond: np.ndarray | None,
    *v_initial: Any,
    body: Graph,
    run_graph: RunGraph,
) -> tuple[Any, ...]:
    """for (i = 0; i < M && cond; ++i) cond, v..., scan... = body(i, cond, v...).

    M and cond are both optional (an omitted one imposes no limit). Scan outputs
    are stacked along a new leading axis.
    """
    n_carried = len(v_initial)
    n_scan = len(body.outputs) - 1 - n_carried
    trip = None if m is None else int(np.asarray(m).reshape(-1)[0])
    keep_going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    carried = list(v_initial)
    scans: list[list[Any]] = [[] for _ in range(n_scan)]
    i = 0
    while keep_going and (trip is None or i < trip):
        outs = run_graph(body, np.array(i, np.int64), np.array(keep_going), *carried)
        keep_going = bool(np.asarray(outs[0]).reshape(-1)[0])
        carried = list(outs[1 : 1 + n_carried])
        for k in range(n_scan):
            scans[k].append(outs[1 + n_carried + k])
        i += 1
    stacked = [
        np.stack(s) if s else _empty_scan_output(body, 1 + n_carried + k)
        for k, s in enumerate(scans)
    ]
    return (*carried, *stacked)


def _scan_iterations(
    body: Graph,
    run_graph: RunGraph,
    states: list[Any],
    slices: list[list[np.ndarray]],
    n_steps: int,
) -> tuple[list[Any], list[list[np.ndarray]]]:
    """Run the body n_steps times; slices[j][t] is scan input j's element at step t."""
    n_state = len(states)
    n_scan_out = len(body.outputs) - n_state
    collected: list[list[np.ndarray]] = [[] for _ in range(n_scan_out)]
    for t in range(n_steps):
        outs = run_graph(body, *states, *(s[t] for s in slices))
        states = list(outs[:n_state])
        for k in range(n_scan_out):
            collected[k].append(np.asarray(outs[n_state + k]))
    return states, collected


@op("Scan", since=9, wants=("run_graph",))
def scan(
    *args: Any,
    body: Graph,
    num_scan_inputs: int,
    scan_input_axes: tuple[int, ...] | None = None,
    scan_input_directions: tuple[int, ...] | None = None,
    scan_output_axes: tuple[int, ...] | None = None,
    scan_output_directions: tuple[int, ...] | None = None,
    run_graph: RunGraph,
) -> tuple[Any, ...]:
    """Opset 9+: no batch axis; per-input scan axes and directions (1 = reverse)."""
    n_state = len(args) - num_scan_inputs
    states = list(args[:n_state])
    scan_inputs = [np.asarray(a) for a in args[n_state:]]
    in_axes = scan_input_axes or (0,) * num_scan_inputs
    in_dirs = scan_input_directions or (0,) * num_scan_inputs
    slices = []
    n_steps = None
    for x, axis, direction in zip(scan_inputs, in_axes, in_dirs, strict=True):
        axis = norm_axis(axis, x.ndim, "Scan")
        n = x.shape[axis]
        if n_steps is not None and n != n_steps:
            raise ValueError(f"Scan: scan inputs have different lengths {n_steps} and {n}")
        n_steps = n
        steps = [np.take(x, t, axis=axis) for t in range(n)]
        slices.append(steps[::-1] if direction else steps)
    states, collected = _scan_iterations(body, run_graph, states, slices, n_steps or 0)
    n_out = len(collected)
    out_axes = scan_output_axes or (0,) * n_out
    out_dirs = scan_output_directions or (0,) * n_out
    results = []
    for k, (elems, axis, direction) in enumerate(zip(collected, out_axes, out_dirs, strict=True)):
        if not elems:
            empty = _empty_scan_output(body, n_state + k)
            results.append(np.moveaxis(empty, 0, norm_axis(axis, empty.ndim, "Scan")))
            continue
        if direction:
            elems = elems[::-1]
        rank = elems[0].ndim + 1
        results.append(np.stack(elems, axis=norm_axis(axis, rank, "Scan")))
    return (*states, *results)


@op("Scan", since=8, wants=("run_graph",))
def scan_v8(
    sequence_lens: np.ndarray | None,
    *args: Any,
    body: Graph,
    num_scan_inputs: int,
    directions: tuple[int, ...] | None = None,
    run_graph: RunGraph,
) -> tuple[Any, ...]:
    """Opset 8: batch axis 0, sequence axis 1, optional per-batch sequence_lens.

    Scan outputs are padded with zeros up to the maximum sequence length (the
    spec leaves the padding undefined).
    """
    n_state = len(args) - num_scan_inputs
    init = [np.asarray(a) for a in args[:n_state]]
    scan_inputs = [np.asarray(a) for a in args[n_state:]]
    dirs = directions or (0,) * num_scan_inputs
    batch, max_len = scan_inputs[0].shape[:2]
    batch_states: list[list[Any]] = []
    batch_scans: list[list[np.ndarray]] = []
    for b in range(batch):
        n = max_len if sequence_lens is None else int(np.asarray(sequence_lens).reshape(-1)[b])
        slices = []
        for x, direction in zip(scan_inputs, dirs, strict=True):
            steps = [x[b, t] for t in range(n)]
            slices.append(steps[::-1] if direction else steps)
        states, collected = _scan_iterations(body, run_graph, [s[b] for s in init], slices, n)
        padded = []
        for k, elems in enumerate(collected):
            if elems:
                out = np.stack(elems)
                pad = np.zeros((max_len - n, *out.shape[1:]), out.dtype)
                padded.append(np.concatenate([out, pad]))
            else:
                empty = _empty_scan_output(body, n_state + k)
                padded.append(np.zeros((max_len, *empty.shape[1:]), empty.dtype))
        batch_states.append(states)
        batch_scans.append(padded)
    final = [np.stack([bs[i] for bs in batch_states]) for i in range(n_state)]
    n_out = len(body.outputs) - n_state
    outs = [np.stack([bs[k] for bs in batch_scans]) for k in range(n_out)]
    return (*final, *outs)
