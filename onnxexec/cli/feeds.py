"""Input feeds for `onnxexec run`: load from .npy/.npz/.pb files or synthesise them
from the declared input types."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from onnxexec.errors import InvalidFeedError
from onnxexec.ir.dtypes import np_dtype
from onnxexec.ir.graph import ValueInfo
from onnxexec.ir.types import SequenceType, TensorType


def parse_pairs(pairs: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for p in pairs:
        name, sep, value = p.partition("=")
        if not sep or not name:
            raise InvalidFeedError(f"{what} '{p}' must look like NAME=VALUE")
        out[name] = value
    return out


def load_array_file(path: str | Path, name: str = "") -> Any:
    """One value from .npy, .npz (the key `name`, or its only array) or TensorProto .pb."""
    p = Path(path)
    if not p.is_file():
        raise InvalidFeedError(f"input file not found: {p}")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return np.load(p, allow_pickle=False)
    if suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            if name in z.files:
                return z[name]
            if len(z.files) == 1:
                return z[z.files[0]]
            raise InvalidFeedError(f"{p}: has arrays {z.files}, none named '{name}'")
    if suffix == ".pb":
        t = onnx.TensorProto()
        try:
            t.ParseFromString(p.read_bytes())
        except Exception as e:
            raise InvalidFeedError(f"{p}: not a TensorProto ({e})") from e
        return numpy_helper.to_array(t)
    raise InvalidFeedError(f"{p}: unsupported input file type (use .npy, .npz or .pb)")


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    p = Path(path)
    if not p.is_file():
        raise InvalidFeedError(f"inputs file not found: {p}")
    with np.load(p, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def concrete_shape(vi: ValueInfo, dims: dict[str, int]) -> tuple[int, ...]:
    t = vi.type
    if not isinstance(t, TensorType) or t.shape is None:
        return ()
    shape = []
    for d in t.shape:
        if isinstance(d, int) and d > 0:
            shape.append(d)
        elif isinstance(d, str) and d in dims:
            shape.append(dims[d])
        else:
            shape.append(1)
    return tuple(shape)


def synthesize(vi: ValueInfo, dims: dict[str, int], rng: np.random.Generator) -> Any:
    """Random value of the declared type: floats ~ N(0,1), ints in [0, 10), bools, 'a' strings."""
    t = vi.type
    if isinstance(t, SequenceType):
        return [synthesize(ValueInfo(vi.name, t.elem), dims, rng)]
    if not isinstance(t, TensorType):
        raise InvalidFeedError(
            f"input '{vi.name}': cannot synthesise a value of type {t}; pass it with --input"
        )
    shape = concrete_shape(vi, dims)
    dt = np_dtype(t.elem_type)
    if dt == np.dtype(object):
        return np.full(shape, "a", dtype=object)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(0, 10, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(np.float32).astype(dt)
