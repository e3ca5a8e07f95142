"""Small helpers shared by op families (not a handler module)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def norm_axis(axis: int, rank: int, op: str = "") -> int:
    """Map a possibly negative axis into [0, rank); raise naming the op when out of range."""
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{op + ': ' if op else ''}axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def norm_axes(axes: Sequence[int], rank: int, op: str = "") -> tuple[int, ...]:
    return tuple(norm_axis(int(a), rank, op) for a in axes)


def ints(x: np.ndarray | Sequence[int] | None) -> tuple[int, ...] | None:
    """An int64 tensor input (shape, axes, pads...) as a tuple of Python ints."""
    if x is None:
        return None
    if type(x) is np.ndarray and x.dtype.kind in "iu":
        return tuple(x.ravel().tolist())  # tolist gives Python ints in one C call
    return tuple(int(v) for v in np.asarray(x).reshape(-1))
