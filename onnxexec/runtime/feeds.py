"""Validate run() feeds against the declared inputs: no array is cast silently.

What onnxruntime converts is converted the same way: Python lists and scalars become
arrays of the declared element type (refusing values that type cannot hold), string
feeds of any numpy kind (|U, |S, void, object of str/bytes) become str objects,
big-endian arrays become native ones, OrtValues give their array. A numpy array of
another dtype is still refused: casting it would hide a bug in the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from onnxexec.errors import InvalidFeedError
from onnxexec.ir.dtypes import np_dtype, type_name
from onnxexec.ir.graph import ValueInfo
from onnxexec.ir.types import OptionalType, SequenceType, TensorType
from onnxexec.runtime.ortvalue import unwrap


def _strings(name: str, v: np.ndarray) -> np.ndarray:
    """A string feed as an object array of str, as onnxruntime stores tensor(string):
    |U as is, |S and void items decoded as UTF-8, object items str or bytes."""
    if v.dtype.kind == "U":
        return v.astype(object)
    if v.dtype.kind not in "SVO":
        raise InvalidFeedError(f"input '{name}': expected tensor(string), got array of {v.dtype}")
    out = np.empty(v.shape, dtype=object)
    flat = out.reshape(-1)
    for i, item in enumerate(v.reshape(-1)):
        if isinstance(item, np.void):
            item = item.tobytes()
        if isinstance(item, bytes | np.bytes_):
            item = bytes(item).decode("utf-8", errors="surrogateescape")
        elif not isinstance(item, str):
            raise InvalidFeedError(
                f"input '{name}': tensor(string) item {i} is a {type(item).__name__}, not str"
            )
        flat[i] = item
    return out


def _from_python(name: str, v: Any, want: np.dtype, t: TensorType) -> np.ndarray:
    """A list or scalar converted to the declared element type, as onnxruntime does,
    refusing values the type cannot hold (1.5 or True for an int64 input, 300 for uint8)."""
    try:
        arr = np.asarray(v)
    except ValueError as e:  # ragged nesting
        raise InvalidFeedError(f"input '{name}': cannot make a tensor from this list: {e}") from e
    if arr.dtype == want:
        return arr
    if arr.size == 0 and arr.dtype == np.float64:  # [] has no element type of its own
        return arr.astype(want)
    kinds = {"b": "b", "i": "iu", "u": "iu", "f": "iuf", "c": "iufc"}.get(want.kind, "")
    if arr.dtype.kind not in kinds:
        raise InvalidFeedError(
            f"input '{name}': expected tensor({type_name(t.elem_type)}), got a "
            f"{type(v).__name__} of {arr.dtype} values"
        )
    out = arr.astype(want)
    if want.kind in "iu" and not np.array_equal(out, arr):
        raise InvalidFeedError(
            f"input '{name}': values do not fit tensor({type_name(t.elem_type)})"
        )
    return out


def _check_tensor(name: str, v: Any, t: TensorType) -> Any:
    v = unwrap(v)
    want = np_dtype(t.elem_type)
    if not isinstance(v, np.ndarray):
        if isinstance(v, np.generic):
            v = np.asarray(v)
        elif isinstance(v, list | tuple | int | float | bool | str | bytes):
            v = np.asarray(v, dtype=object) if want.kind == "O" else _from_python(name, v, want, t)
        else:
            raise InvalidFeedError(
                f"input '{name}': expected a numpy array of tensor({type_name(t.elem_type)}), "
                f"got {type(v).__name__}"
            )
    if want == np.dtype(object):
        v = _strings(name, v)
    elif v.dtype != want:
        if v.dtype.newbyteorder("=") == want:  # big-endian (or swapped) data: same values
            v = v.astype(want)
        else:
            raise InvalidFeedError(
                f"input '{name}': expected tensor({type_name(t.elem_type)}), got {v.dtype} "
                "(onnxexec does not cast feeds; convert with .astype first)"
            )
    if t.shape is not None:
        if v.ndim != len(t.shape):
            raise InvalidFeedError(
                f"input '{name}': expected rank {len(t.shape)} {t.shape_str()}, "
                f"got shape {list(v.shape)}"
            )
        for axis, (d, got) in enumerate(zip(t.shape, v.shape, strict=True)):
            if isinstance(d, int) and d > 0 and d != got:
                raise InvalidFeedError(
                    f"input '{name}': dimension {axis} must be {d} {t.shape_str()}, "
                    f"got shape {list(v.shape)}"
                )
    return v


def check_value(name: str, v: Any, t: Any) -> Any:
    if t is None:
        return v
    if isinstance(t, TensorType):
        return _check_tensor(name, v, t)
    v = unwrap(v)
    if isinstance(t, SequenceType):
        if not isinstance(v, list | tuple):
            raise InvalidFeedError(
                f"input '{name}': expected a sequence (list), got {type(v).__name__}"
            )
        return [check_value(f"{name}[{i}]", x, t.elem) for i, x in enumerate(v)]
    if isinstance(t, OptionalType):
        return None if v is None else check_value(name, v, t.elem)
    return v


def validate_feeds(
    feed: Mapping[str, Any], declared: tuple[ValueInfo, ...], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """Checked copy of `feed`; missing inputs with an initializer take its value."""
    if not isinstance(feed, Mapping):
        raise InvalidFeedError(
            f"input_feed must be a dict of name -> array, got {type(feed).__name__}"
        )
    by_name = {v.name: v for v in declared}
    unknown = [k for k in feed if k not in by_name]
    if unknown:
        raise InvalidFeedError(
            f"unknown input name(s) {unknown}; the model's inputs are {list(by_name)}"
        )
    out: dict[str, Any] = {}
    for vi in declared:
        if vi.name in feed:
            out[vi.name] = check_value(vi.name, feed[vi.name], vi.type)
        elif vi.name in defaults:
            out[vi.name] = defaults[vi.name]
        elif isinstance(vi.type, OptionalType):
            out[vi.name] = None
    missing = [v.name for v in declared if v.name not in out]
    if missing:
        # onnxruntime's own wording first: programs and its test suite match on it
        raise InvalidFeedError(
            f"Required inputs ({missing}) are missing from input feed ({list(feed)}). "
            f"The model's inputs are {[f'{v.name}: {v.type}' for v in declared]}"
        )
    return out


class FeedChecker:
    """validate_feeds for one session's inputs, with the per-input work done once.

    A feed that is already a numpy array of the declared dtype, rank and fixed
    dimensions takes a short path; anything else goes through check_value, so every
    error is validate_feeds' own.
    """

    def __init__(self, declared: tuple[ValueInfo, ...], defaults: Mapping[str, Any]) -> None:
        self._declared = declared
        self._defaults = defaults
        self._names = frozenset(v.name for v in declared)
        plain = []
        for vi in declared:
            t = vi.type
            fast = None
            # string feeds always take the checked path: their items are converted
            if isinstance(t, TensorType) and t.shape is not None and t.elem_type != 8:
                want = np_dtype(t.elem_type)
                fixed = tuple(
                    (axis, d) for axis, d in enumerate(t.shape) if isinstance(d, int) and d > 0
                )
                fast = (want, len(t.shape), fixed)
            plain.append((vi, fast))
        self._inputs = tuple(plain)

    def __call__(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        if type(feed) is not dict or not feed.keys() <= self._names:
            return validate_feeds(feed, self._declared, self._defaults)
        out: dict[str, Any] = {}
        for vi, fast in self._inputs:
            name = vi.name
            v = feed.get(name, _ABSENT)
            if (
                fast is not None
                and type(v) is np.ndarray
                and v.dtype is fast[0]
                and v.ndim == fast[1]
            ):
                shape = v.shape
                for axis, d in fast[2]:
                    if shape[axis] != d:
                        break
                else:
                    out[name] = v
                    continue
            if v is not _ABSENT:
                out[name] = check_value(name, v, vi.type)
            elif name in self._defaults:
                out[name] = self._defaults[name]
            elif isinstance(vi.type, OptionalType):
                out[name] = None
            else:
                return validate_feeds(feed, self._declared, self._defaults)  # raises
        return out


_ABSENT = object()
