"""Shape manipulation: Reshape, Transpose, Squeeze/Unsqueeze, Flatten, Expand, Shape,
Size, Concat, Split, Tile.

Handlers return views where numpy gives them for free (Reshape, Transpose, Squeeze):
handlers never write into their inputs, so sharing memory is harmless.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from onnxexec.ops.common import ints, norm_axes, norm_axis
from onnxexec.ops.registry import op


def _target_shape(
    in_shape: tuple[int, ...], shape: tuple[int, ...], allowzero: int
) -> Sequence[int]:
    """Resolve 0 (copy the input dim, unless allowzero) and -1 (infer) in a Reshape shape."""
    if min(shape, default=1) > 0 and math.prod(shape) == math.prod(in_shape):
        return shape  # every dim given explicitly: nothing to resolve
    out = list(shape)
    if allowzero and 0 in out and -1 in out:
        raise ValueError("Reshape: allowzero=1 forbids a shape with both 0 and -1")
    infer = []
    for i, d in enumerate(out):
        if d > 0:
            continue
        if d == 0:
            if not allowzero:
                if i >= len(in_shape):
                    raise ValueError(
                        f"Reshape: shape[{i}] = 0 copies a dim the input {in_shape} lacks"
                    )
                out[i] = in_shape[i]
        elif d == -1:
            infer.append(i)
        else:
            raise ValueError(f"Reshape: invalid dim {d} in shape {list(shape)}")
    total = math.prod(in_shape)  # exact Python ints, and ~10x cheaper than np.prod here
    if len(infer) > 1:
        raise ValueError(f"Reshape: more than one -1 in shape {list(shape)}")
    if infer:
        out[infer[0]] = 1
        known = math.prod(out)
        if known == 0 or total % known:
            raise ValueError(
                f"Reshape: cannot infer -1 reshaping {list(in_shape)} to {list(shape)}"
            )
        out[infer[0]] = total // known
    elif math.prod(out) != total:
        raise ValueError(f"Reshape: cannot reshape {list(in_shape)} to {list(shape)}")
    return out


def _reshape(data: np.ndarray, dims: tuple[int, ...], allowzero: int) -> np.ndarray:
    given = dims
    if not allowzero and 0 in dims and len(dims) <= data.ndim:  # 0 copies the input dim
        given = tuple([data.shape[i] if d == 0 else d for i, d in enumerate(dims)])
    # No 0 and at most one -1 (numpy raises on two): numpy's inference and element
    # count check are the spec's.
    if min(given, default=1) >= -1 and 0 not in given:
        try:
            return data.reshape(given)
        except ValueError:
            pass  # _target_shape raises the spec-worded error
    return data.reshape(_target_shape(data.shape, dims, allowzero))


@op("Reshape", since=14)
def reshape(data: np.ndarray, shape: np.ndarray, *, allowzero: int = 0) -> np.ndarray:
    """data reshaped; 0 copies the input dim (or means 0 with allowzero=1), -1 is inferred."""
    return _reshape(data, ints(shape), allowzero)


@op("Reshape", since=5)
def reshape_v5(data: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Opsets 5-13: shape as an input, 0 always copies the input dim."""
    return _reshape(data, ints(shape), 0)


@op("Reshape", since=1)
def reshape_v1(
    data: np.ndarray, *, shape: tuple[int, ...] = (), consumed_inputs: tuple[int, ...] = ()
) -> np.ndarray:
    """Opsets 1-4: shape as an attribute (consumed_inputs is a legacy no-op)."""
    return data.reshape(_target_shape(data.shape, tuple(shape), 0))


@lru_cache(maxsize=256)
def _is_permutation(perm: tuple[int, ...], rank: int) -> bool:
    # Stricter than numpy's transpose, which also takes negative axes.
    return sorted(perm) == list(range(rank))


@op("Transpose", since=1)
def transpose(data: np.ndarray, *, perm: tuple[int, ...] | None = None) -> np.ndarray:
    """Permute axes; the default reverses them."""
    if perm is None:
        return data.transpose()
    if not _is_permutation(tuple(perm), data.ndim):
        raise ValueError(f"Transpose: perm {list(perm)} is not a permutation of rank {data.ndim}")
    return data.transpose(perm)


def _squeeze(data: np.ndarray, axes: tuple[int, ...] | None) -> np.ndarray:
    if axes:  # fast path for valid axes; anything wrong goes on to raise below
        r, dims = data.ndim, list(data.shape)
        pos = sorted({a + r if a < 0 else a for a in axes}, reverse=True)
        if 0 <= pos[-1] and pos[0] < r and all(dims[a] == 1 for a in pos):
            for a in pos:
                del dims[a]
            return data.reshape(dims)
    if not axes:  # omitted or empty: every size-1 axis, as onnxruntime does
        return data.reshape([d for d in data.shape if d != 1])
    axes = norm_axes(axes, data.ndim, "Squeeze")
    for a in axes:
        if data.shape[a] != 1:
            raise ValueError(f"Squeeze: axis {a} has size {data.shape[a]}, not 1")
    return data.reshape([d for i, d in enumerate(data.shape) if i not in axes])


@op("Squeeze", since=13)
def squeeze(data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    """Drop size-1 axes (all of them when axes is omitted)."""
    return _squeeze(data, ints(axes))


@op("Squeeze", since=1)
def squeeze_v1(data: np.ndarray, *, axes: tuple[int, ...] | None = None) -> np.ndarray:
    """Opsets 1-12: axes as an attribute."""
    return _squeeze(data, axes)


def _unsqueeze(data: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    # Axes index the output, whose rank is rank(data) + len(axes).
    out_rank = data.ndim + len(axes)
    pos = sorted(a + out_rank if a < 0 else a for a in axes)
    if pos and 0 <= pos[0] and pos[-1] < out_rank and len(set(pos)) == len(pos):
        dims = list(data.shape)
        for a in pos:  # ascending, so each 1 lands at its final output position
            dims.insert(a, 1)
        return data.reshape(dims)
    axes = norm_axes(axes, out_rank, "Unsqueeze")
    if len(set(axes)) != len(axes):
        raise ValueError(f"Unsqueeze: repeated axes {list(axes)}")
    dims = iter(data.shape)
    return data.reshape([1 if i in axes else next(dims) for i in range(out_rank)])


@op("Unsqueeze", since=13)
def unsqueeze(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Insert size-1 axes at the given output positions."""
    return _unsqueeze(data, ints(axes))


@op("Unsqueeze", since=1)
def unsqueeze_v1(data: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    """Opsets 1-12: axes as an attribute."""
    return _unsqueeze(data, axes)


@op("Flatten", since=1)
def flatten(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """(d0..dn) -> (d0*..*d[axis-1], d[axis]*..*dn); axis in [-r, r]."""
    r = x.ndim
    if not -r <= axis <= r:
        raise ValueError(f"Flatten: axis {axis} out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@op("Expand", since=8)
def expand(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Broadcast x against `shape` (numpy rules; `shape` may hold 1s smaller than x's dims)."""
    out_shape = np.broadcast_shapes(x.shape, ints(shape))
    return np.array(np.broadcast_to(x, out_shape))


@op("Shape", since=15)
def shape(data: np.ndarray, *, start: int = 0, end: int | None = None) -> np.ndarray:
    """int64 shape slice [start, end), both clamped to [0, rank] after negative wrap."""
    if start == 0 and end is None:
        return np.array(data.shape, dtype=np.int64)
    r = data.ndim
    start = min(max(start + r if start < 0 else start, 0), r)
    end = r if end is None else end
    end = min(max(end + r if end < 0 else end, 0), r)
    return np.array(data.shape[start:end], dtype=np.int64)


@op("Shape", since=1)
def shape_v1(data: np.ndarray) -> np.ndarray:
    """Opsets 1-14: the whole shape."""
    return np.array(data.shape, dtype=np.int64)


@op("Size", since=1)
def size(data: np.ndarray) -> np.ndarray:
    """int64 scalar element count."""
    return np.array(data.size, dtype=np.int64)


@op("Concat", since=4)
def concat(*inputs: np.ndarray, axis: int) -> np.ndarray:
    """Join along `axis` (negative from opset 11); empty inputs take part like any other."""
    if inputs:
        a = axis + inputs[0].ndim if axis < 0 else axis
        if 0 <= a < inputs[0].ndim:
            return np.concatenate(inputs, axis=a)
    if not inputs:
        raise ValueError("Concat: no inputs")
    rank = inputs[0].ndim
    return np.concatenate(inputs, axis=norm_axis(axis, rank, "Concat"))


@op("Concat", since=1)
def concat_v1(*inputs: np.ndarray, axis: int = 1) -> np.ndarray:
    """Opsets 1-3: axis optional, default 1."""
    return concat(*inputs, axis=axis)


def _split(x: np.ndarray, sizes: tuple[int, ...], axis: int) -> tuple[np.ndarray, ...]:
    axis = norm_axis(axis, x.ndim, "Split")
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"Split: sizes {list(sizes)} do not add up to dim {x.shape[axis]}")
    bounds = np.cumsum((0, *sizes))
    idx: list[slice] = [slice(None)] * x.ndim
    out = []
    for b, e in itertools.pairwise(bounds):
        idx[axis] = slice(int(b), int(e))
        out.append(x[tuple(idx)])
    return tuple(out)


def _equal_sizes(dim: int, n: int) -> tuple[int, ...]:
    if n <= 0 or dim % n:
        raise ValueError(f"Split: dim {dim} does not split into {n} equal parts")
    return (dim // n,) * n


@op("Split", since=18, wants=("outputs_used",))
def split(
    x: np.ndarray,
    split: np.ndarray | None = None,
    *,
    axis: int = 0,
    num_outputs: int | None = None,
    outputs_used: tuple[bool, ...] = (),
) -> tuple[np.ndarray, ...]:
    """Split by `split` sizes, or into num_outputs chunks of ceil(dim/n), the last smaller.

    The spec requires one of the two; like onnxruntime we fall back to the node's output
    count when both are missing.
    """
    if split is not None:
        return _split(x, ints(split), axis)
    n = num_outputs if num_outputs is not None else len(outputs_used)
    dim = x.shape[norm_axis(axis, x.ndim, "Split")]
    if n < 1:
        raise ValueError("Split: no output count (num_outputs) and no split sizes")
    chunk = -(-dim // n)
    sizes = [min(chunk, max(dim - i * chunk, 0)) for i in range(n)]
    return _split(x, tuple(sizes), axis)


@op("Split", since=13, wants=("num_outputs",))
def split_v13(
    x: np.ndarray, split: np.ndarray | None = None, *, axis: int = 0, num_outputs: int
) -> tuple[np.ndarray, ...]:
    """Opsets 13-17: sizes as an input, else equal parts, one per node output."""
    axis_n = norm_axis(axis, x.ndim, "Split")
    sizes = ints(split) if split is not None else _equal_sizes(x.shape[axis_n], num_outputs)
    return _split(x, sizes, axis)


@op("Split", since=2, wants=("num_outputs",))
def split_v2(
    x: np.ndarray, *, axis: int = 0, split: tuple[int, ...] | None = None, num_outputs: int
) -> tuple[np.ndarray, ...]:
    """Opsets 2-12: sizes as an attribute."""
    axis_n = norm_axis(axis, x.ndim, "Split")
    sizes = split if split else _equal_sizes(x.shape[axis_n], num_outputs)
    return _split(x, tuple(sizes), axis)


@op("Split", since=1, wants=("num_outputs",))
def split_v1(
    x: np.ndarray,
    split_in: np.ndarray | None = None,
    *,
    axis: int = 0,
    split: tuple[int, ...] | None = None,
    num_outputs: int,
) -> tuple[np.ndarray, ...]:
    """Opset 1: sizes from the optional second input or the attribute."""
    if split_in is not None:
        split = ints(split_in)
    return split_v2(x, axis=axis, split=split, num_outputs=num_outputs)


@op("Tile", since=6)
def tile(x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    """Repeat x repeats[i] times along each axis i."""
    reps = ints(repeats)
    if len(reps) != x.ndim:
        raise ValueError(f"Tile: {len(reps)} repeats for rank {x.ndim}")
    return np.tile(x, reps)


@op("Tile", since=1)
def tile_v1(x: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Opsets 1-5: repeat `tiles` times along the single axis `axis`."""
    reps = [1] * x.ndim
    reps[norm_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim, "Tile")] = int(
        np.asarray(tiles).reshape(-1)[0]
    )
    return np.tile(x, reps)
