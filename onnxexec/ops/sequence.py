"""Sequence ops. A sequence value is a Python list of np.ndarray; ops never mutate
their input list (SequenceInsert/SequenceErase return a new one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.ir.graph import Graph
from onnxexec.ops.common import norm_axis
from onnxexec.ops.registry import op


def _position(seq: list[Any], position: np.ndarray | None, default: int, *, insert: bool) -> int:
    """Resolve a possibly negative position; insertion allows len(seq) (append)."""
    n = len(seq)
    if position is None:
        return default
    p = int(np.asarray(position).reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        raise IndexError(f"sequence position {p} out of range for length {n}")
    return p + n if p < 0 else p


@op("SequenceEmpty", since=11)
def sequence_empty(*, dtype: int = 1) -> list[np.ndarray]:
    """An empty sequence (the element type lives only in the static type)."""
    return []


@op("SequenceConstruct", since=11)
def sequence_construct(*inputs: np.ndarray) -> list[np.ndarray]:
    return list(inputs)


@op("SequenceInsert", since=11)
def sequence_insert(
    seq: list[np.ndarray], tensor: np.ndarray, position: np.ndarray | None = None
) -> list[np.ndarray]:
    """New sequence with `tensor` inserted before `position` (default: appended)."""
    out = list(seq)
    out.insert(_position(seq, position, len(seq), insert=True), tensor)
    return out


@op("SequenceAt", since=11)
def sequence_at(seq: list[np.ndarray], position: np.ndarray) -> np.ndarray:
    return seq[_position(seq, position, 0, insert=False)]


@op("SequenceErase", since=11)
def sequence_erase(seq: list[np.ndarray], position: np.ndarray | None = None) -> list[np.ndarray]:
    """New sequence without the element at `position` (default: the last)."""
    out = list(seq)
    del out[_position(seq, position, len(seq) - 1, insert=False)]
    return out


@op("SequenceLength", since=11)
def sequence_length(seq: list[np.ndarray]) -> np.ndarray:
    """int64 scalar."""
    return np.array(len(seq), np.int64)


@op("SplitToSequence", since=11)
def split_to_sequence(
    x: np.ndarray, split: np.ndarray | None = None, *, axis: int = 0, keepdims: int = 1
) -> list[np.ndarray]:
    """Split along `axis`: no `split` -> size-1 parts (squeezed unless keepdims);
    scalar split -> equal chunks with a smaller last one; 1-D split -> given sizes."""
    axis = norm_axis(axis, x.ndim, "SplitToSequence")
    n = x.shape[axis]
    if split is None:
        parts = [np.take(x, [i], axis=axis) for i in range(n)]
        return parts if keepdims else [np.squeeze(p, axis=axis) for p in parts]
    split = np.asarray(split)
    if split.ndim == 0:
        size = int(split)
        bounds = list(range(size, n, size))
    else:
        bounds = np.cumsum(split.astype(np.int64))[:-1].tolist()
    return [np.copy(p) for p in np.split(x, bounds, axis=axis)]


@op("ConcatFromSequence", since=11)
def concat_from_sequence(seq: list[np.ndarray], *, axis: int, new_axis: int = 0) -> np.ndarray:
    """Concatenate along `axis`, or stack along a new `axis` (which may be -rank-1..rank)."""
    if new_axis:
        rank = seq[0].ndim + 1
        return np.stack(seq, axis=norm_axis(axis, rank, "ConcatFromSequence"))
    return np.concatenate(seq, axis=norm_axis(axis, seq[0].ndim, "ConcatFromSequence"))


@op("SequenceMap", since=17, wants=("run_graph",))
def sequence_map(
    input_sequence: list[np.ndarray],
    *additional_inputs: Any,
    body: Graph,
    run_graph: Callable[..., list[Any]],
) -> tuple[list[np.ndarray], ...]:
    """outputs[k][i] = body(input_sequence[i], extra_j[i] or extra_j, ...)[k].

    Sequence inputs are indexed per sample; tensor inputs are passed whole.
    """
    n = len(input_sequence)
    for extra in additional_inputs:
        if isinstance(extra, list) and len(extra) != n:
            raise ValueError(f"SequenceMap: sequence inputs have lengths {n} and {len(extra)}")
    results: list[list[np.ndarray]] = [[] for _ in body.outputs]
    for i in range(n):
        args = [e[i] if isinstance(e, list) else e for e in additional_inputs]
        for k, v in enumerate(run_graph(body, input_sequence[i], *args)):
            results[k].append(v)
    return tuple(results)
