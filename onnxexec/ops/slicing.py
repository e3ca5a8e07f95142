"""Slice, Pad, Compress, ReverseSequence: ops that select or add ranges of a tensor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onnxexec.ops.common import ints, norm_axes, norm_axis
from onnxexec.ops.registry import op


def _axis_slice(start: int, end: int, step: int, dim: int) -> slice:
    """One axis of Slice, clamped as Operators.md Slice-13 says.

    Negative start/end get `dim` added once; then for step > 0 both clamp to [0, dim],
    for step < 0 start clamps to [0, dim-1] and end to [-1, dim-1], where -1 means
    "before index 0" (a Python slice end of None). INT_MAX / INT_MIN ends fall out.
    """
    if step == 0:
        raise ValueError("Slice: steps must be non-zero")
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start = min(max(start, 0), dim)
        end = min(max(end, 0), dim)
        return slice(start, end, step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


def _slice(
    data: np.ndarray,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None,
    steps: Sequence[int] | None,
) -> np.ndarray:
    if len(starts) != len(ends):
        raise ValueError(f"Slice: {len(starts)} starts but {len(ends)} ends")
    r = data.ndim
    if axes is None:  # the leading axes; norm_axes below rejects more than rank of them
        axes = tuple(range(len(starts)))
    if steps is None:
        steps = (1,) * len(starts)
    if len(axes) == len(steps) == len(starts):
        pos = [a + r if a < 0 else a for a in axes]
        if min(steps, default=1) > 0 and all(0 <= a < r for a in pos) and len(set(pos)) == len(pos):
            # Positive steps: Python's own slice clamping (negative +dim, then [0, dim])
            # is exactly the spec's, so the bounds go to numpy as given.
            fast: list[slice] = [slice(None)] * r
            for a, s, e, st in zip(pos, starts, ends, steps, strict=True):
                fast[a] = slice(s, e, st)
            return data[tuple(fast)]
    axes = norm_axes(axes, r, "Slice")
    steps = tuple(steps)
    if not len(axes) == len(steps) == len(starts):
        raise ValueError("Slice: starts, ends, axes and steps differ in length")
    if len(set(axes)) != len(axes):
        raise ValueError(f"Slice: repeated axes {list(axes)}")
    idx: list[slice] = [slice(None)] * data.ndim
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        idx[a] = _axis_slice(s, e, st, data.shape[a])
    return data[tuple(idx)]


@op("Slice", since=10)
def slice_(
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    axes: np.ndarray | None = None,
    steps: np.ndarray | None = None,
) -> np.ndarray:
    """data[starts:ends:steps] on `axes` (all leading axes by default); steps may be negative."""
    return _slice(data, ints(starts), ints(ends), ints(axes), ints(steps))


@op("Slice", since=1)
def slice_v1(
    data: np.ndarray,
    *,
    starts: tuple[int, ...],
    ends: tuple[int, ...],
    axes: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Opsets 1-9: starts/ends/axes as attributes, step 1."""
    return _slice(data, starts, ends, axes, None)


_PAD_MODES = {"constant", "reflect", "edge", "wrap"}


def _pad(
    data: np.ndarray,
    pads: Sequence[int],
    mode: str,
    value: float | np.ndarray | None,
    axes: Sequence[int] | None = None,
    op_name: str = "Pad",
) -> np.ndarray:
    """Pad by [x1_begin, x2_begin, ..., x1_end, x2_end]; negative pads crop first."""
    if mode not in _PAD_MODES:
        raise ValueError(f"{op_name}: unknown mode '{mode}'")
    axes = tuple(range(data.ndim)) if axes is None else norm_axes(axes, data.ndim, op_name)
    if len(pads) != 2 * len(axes):
        raise ValueError(f"{op_name}: {len(pads)} pads for {len(axes)} axes")
    width = [(0, 0)] * data.ndim
    crop: list[slice] = [slice(None)] * data.ndim
    n = len(axes)
    for i, a in enumerate(axes):
        b, e = int(pads[i]), int(pads[n + i])
        width[a] = (max(b, 0), max(e, 0))
        crop[a] = slice(-min(b, 0), data.shape[a] + min(e, 0))
    x = data[tuple(crop)]
    if not any(b or e for b, e in width):
        return x.copy()
    if mode == "constant":
        if data.dtype == object:
            fill = "" if value is None else value
        else:
            fill = np.asarray(0 if value is None else value).astype(data.dtype)
        return np.pad(x, width, mode="constant", constant_values=fill)
    for a, (b, e) in enumerate(width):
        if (b or e) and x.shape[a] == 0:
            raise ValueError(f"{op_name}: mode '{mode}' cannot pad empty axis {a}")
    return np.pad(x, width, mode=mode)


@op("Pad", since=18)
def pad(
    data: np.ndarray,
    pads: np.ndarray,
    constant_value: np.ndarray | None = None,
    axes: np.ndarray | None = None,
    *,
    mode: str = "constant",
) -> np.ndarray:
    """Pad (or crop, for negative pads) the given axes; modes constant/reflect/edge/wrap."""
    value = None if constant_value is None or constant_value.size == 0 else constant_value.flat[0]
    return _pad(data, ints(pads), mode, value, ints(axes))


@op("Pad", since=11)
def pad_v11(
    data: np.ndarray,
    pads: np.ndarray,
    constant_value: np.ndarray | None = None,
    *,
    mode: str = "constant",
) -> np.ndarray:
    """Opsets 11-17: pads for every axis."""
    return pad(data, pads, constant_value, None, mode=mode)


@op("Pad", since=2)
def pad_v2(
    data: np.ndarray, *, pads: tuple[int, ...], mode: str = "constant", value: float = 0.0
) -> np.ndarray:
    """Opsets 2-10: pads and value as attributes."""
    return _pad(data, pads, mode, value)


@op("Pad", since=1)
def pad_v1(
    data: np.ndarray, *, paddings: tuple[int, ...], mode: str = "constant", value: float = 0.0
) -> np.ndarray:
    """Opset 1: the pads attribute is called `paddings`."""
    return _pad(data, paddings, mode, value)


@op("Compress", since=9)
def compress(
    input: np.ndarray,  # noqa: A002 - the spec's input name
    condition: np.ndarray,
    *,
    axis: int | None = None,
) -> np.ndarray:
    """Keep the slices along `axis` (or elements of the flattened input) where condition is true.

    condition may be shorter than the axis: the slices past its end are dropped.
    """
    cond = np.asarray(condition, dtype=bool).reshape(-1)
    if axis is None:
        flat = input.reshape(-1)
        if cond.size > flat.size:
            raise ValueError(f"Compress: condition has {cond.size} > {flat.size} elements")
        return flat[: cond.size][cond]
    axis = norm_axis(axis, input.ndim, "Compress")
    if cond.size > input.shape[axis]:
        raise ValueError(f"Compress: condition has {cond.size} > {input.shape[axis]} elements")
    return np.compress(cond, input, axis=axis)


@op("ReverseSequence", since=10)
def reverse_sequence(
    input: np.ndarray,  # noqa: A002 - the spec's input name
    sequence_lens: np.ndarray,
    *,
    batch_axis: int = 1,
    time_axis: int = 0,
) -> np.ndarray:
    """For batch b, reverse the first sequence_lens[b] steps along time_axis."""
    if {batch_axis, time_axis} - {0, 1} or batch_axis == time_axis:
        raise ValueError("ReverseSequence: batch_axis and time_axis must be 0 and 1")
    x = np.moveaxis(input, (batch_axis, time_axis), (0, 1))
    out = x.copy()
    lens = ints(sequence_lens)
    if len(lens) != x.shape[0]:
        raise ValueError(f"ReverseSequence: {len(lens)} lengths for batch {x.shape[0]}")
    for b, n in enumerate(lens):
        if not 0 <= n <= x.shape[1]:
            raise ValueError(f"ReverseSequence: sequence_lens[{b}] = {n} out of [0, {x.shape[1]}]")
        out[b, :n] = x[b, :n][::-1]
    return np.moveaxis(out, (0, 1), (batch_axis, time_axis))
