"""Validate run() feeds against the declared inputs: nothing is cast silently."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from onnxexec.errors import InvalidFeedError
from onnxexec.ir.dtypes import np_dtype, type_name
from onnxexec.ir.graph import ValueInfo
from onnxexec.ir.types import OptionalType, SequenceType, TensorType


def _check_tensor(name: str, v: Any, t: TensorType) -> Any:
    if not isinstance(v, np.ndarray):
        if isinstance(v, np.generic):
            v = np.asarray(v)
        else:
            raise InvalidFeedError(
                f"input '{name}': expected a numpy array of tensor({type_name(t.elem_type)}), "
                f"got {type(v).__name__}"
            )
    want = np_dtype(t.elem_type)
    if want == np.dtype(object):
        if v.dtype.kind not in "OU":
            raise InvalidFeedError(
                f"input '{name}': expected tensor(string), got array of {v.dtype}"
            )
        if v.dtype.kind == "U":  # same values, numpy's fixed-width form of str
            v = v.astype(object)
    elif v.dtype != want:
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


def _shape_str(t: Any) -> str:
    return t.shape_str() if isinstance(t, TensorType) else ""


def check_value(name: str, v: Any, t: Any) -> Any:
    if t is None:
        return v
    if isinstance(t, TensorType):
        return _check_tensor(name, v, t)
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
        else:
            raise InvalidFeedError(
                f"missing input '{vi.name}' ({vi.type} {_shape_str(vi.type)}); "
                f"the model's inputs are {list(by_name)}"
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
            if isinstance(t, TensorType) and t.shape is not None:
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
