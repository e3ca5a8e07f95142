"""ai.onnx.ml encoders and map ops: LabelEncoder, CategoryMapper, OneHotEncoder,
DictVectorizer, CastMap, ZipMap.

Maps are Python dicts and a sequence of maps is a list of dicts (the runtime's
value model); string tensors are object arrays of str.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from onnxexec.ops.ml_common import memo
from onnxexec.ops.registry import op

ML: Final = "ai.onnx.ml"
_MAX_DISPLAY_KEYS: Final = 64


# Below this many elements a dict lookup per element beats np.unique's sort.
_PER_ELEMENT_MAX: Final = 512


def _table(keys: np.ndarray, values: np.ndarray) -> tuple[dict[Any, Any], Any]:
    """(key -> value with the first of repeated keys winning, the value of a NaN key or None)."""
    nan_value = None
    table: dict[Any, Any] = {}
    for k, v in zip(keys.reshape(-1).tolist(), values.reshape(-1).tolist(), strict=True):
        if isinstance(k, float) and np.isnan(k):
            nan_value = v
        else:
            table.setdefault(k, v)
    return table, nan_value


def _map_values(
    x: np.ndarray, table: dict[Any, Any], nan_value: Any, default: Any, dtype: Any
) -> np.ndarray:
    """Every element of x through `table` (default when absent), shape kept."""
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.empty(x.shape, dtype=dtype)
    nan_to = default if nan_value is None else nan_value
    floats = x.dtype.kind == "f"
    if x.dtype == object or flat.size <= _PER_ELEMENT_MAX:
        get = table.get
        if floats:  # u != u only for NaN
            mapped = [nan_to if u != u else get(u, default) for u in flat.tolist()]
            return np.array(mapped, dtype=dtype).reshape(x.shape)
        looked = map(get, flat.tolist(), itertools.repeat(default))
        return np.fromiter(looked, dtype, flat.size).reshape(x.shape)
    uniq, inverse = np.unique(flat, return_inverse=True)
    looked = [nan_to if floats and u != u else table.get(u, default) for u in uniq.tolist()]
    res = np.asarray(looked, dtype=dtype)[inverse.reshape(-1)]
    if floats:  # np.unique keeps each NaN apart; map them explicitly
        nan = np.isnan(flat)
        if nan.any():
            res[nan] = nan_to
    return res.reshape(x.shape)


def _lookup(x: np.ndarray, keys: np.ndarray, values: np.ndarray, default: Any) -> np.ndarray:
    """Map every element of x through keys -> values (default when absent), shape kept.

    Float keys compare by value, and a NaN key matches NaN inputs.
    """
    return _map_values(x, *_table(keys, values), default, values.dtype)


def _pick(*candidates: Any) -> Any:
    for c in candidates:
        if c is not None and len(c):
            return c
    return None


@op("LabelEncoder", since=4, domain=ML)
def label_encoder(
    x: np.ndarray,
    *,
    default_float: float = -0.0,
    default_int64: int = -1,
    default_string: str = "_Unused",
    default_tensor: np.ndarray | None = None,
    keys_floats: Sequence[float] | None = None,
    keys_int64s: Sequence[int] | None = None,
    keys_strings: Sequence[str] | None = None,
    keys_tensor: np.ndarray | None = None,
    values_floats: Sequence[float] | None = None,
    values_int64s: Sequence[int] | None = None,
    values_strings: Sequence[str] | None = None,
    values_tensor: np.ndarray | None = None,
) -> np.ndarray:
    """Map each element through keys_* -> values_*; the values' type is the output type.

    Opset 4 adds *_tensor keys/values of any listed type and default_tensor (a
    1-element tensor whose dtype matches values_tensor).
    """
    keys = _pick(keys_tensor, keys_floats, keys_int64s, keys_strings)
    if keys is None:
        raise ValueError(
            "LabelEncoder: one of keys_tensor/keys_floats/keys_int64s/keys_strings is required"
        )
    if keys_tensor is not None:
        k = np.asarray(keys_tensor).reshape(-1)
    elif keys is keys_floats:
        k = np.asarray(keys, dtype=np.float32)
    elif keys is keys_int64s:
        k = np.asarray(keys, dtype=np.int64)
    else:
        k = np.array(list(keys), dtype=object)
    if values_tensor is not None:
        v = np.asarray(values_tensor).reshape(-1)
        if default_tensor is not None:
            default: Any = np.asarray(default_tensor).reshape(-1)[0]
        elif v.dtype == object:
            default = "_Unused"
        elif v.dtype.kind == "f":
            default = -0.0
        else:
            default = -1
    elif _pick(values_floats) is not None:
        v, default = np.asarray(values_floats, dtype=np.float32), default_float
    elif _pick(values_int64s) is not None:
        v, default = np.asarray(values_int64s, dtype=np.int64), default_int64
    elif _pick(values_strings) is not None:
        v, default = np.array(list(values_strings or ()), dtype=object), default_string
    else:
        raise ValueError(
            "LabelEncoder: one of values_tensor/values_floats/values_int64s/values_strings "
            "is required"
        )
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"LabelEncoder: {k.shape[0]} keys but {v.shape[0]} values")
    if (x.dtype == object) != (k.dtype == object):
        raise TypeError(
            f"LabelEncoder: input of type {x.dtype} does not match keys of type {k.dtype}"
        )
    if x.dtype != object:
        k = k.astype(x.dtype)
    return _lookup(x, k, v, default)


@op("LabelEncoder", since=2, domain=ML)
def label_encoder_v2(
    x: np.ndarray,
    *,
    default_float: float = -0.0,
    default_int64: int = -1,
    default_string: str = "_Unused",
    keys_floats: Sequence[float] | None = None,
    keys_int64s: Sequence[int] | None = None,
    keys_strings: Sequence[str] | None = None,
    values_floats: Sequence[float] | None = None,
    values_int64s: Sequence[int] | None = None,
    values_strings: Sequence[str] | None = None,
) -> np.ndarray:
    """Opsets 2-3: keys_*/values_* lists only (string, int64, float)."""
    return label_encoder(
        x,
        default_float=default_float,
        default_int64=default_int64,
        default_string=default_string,
        keys_floats=keys_floats,
        keys_int64s=keys_int64s,
        keys_strings=keys_strings,
        values_floats=values_floats,
        values_int64s=values_int64s,
        values_strings=values_strings,
    )


@op("LabelEncoder", since=1, domain=ML)
def label_encoder_v1(
    x: np.ndarray,
    *,
    classes_strings: Sequence[str] | None = None,
    default_int64: int = -1,
    default_string: str = "_Unused",
) -> np.ndarray:
    """Opset 1: string -> its index in classes_strings, or int64 index -> string."""
    classes = np.array(list(classes_strings or ()), dtype=object)
    index = np.arange(classes.shape[0], dtype=np.int64)
    if x.dtype == object:
        return _lookup(x, classes, index, default_int64)
    return _lookup(x.astype(np.int64), index, classes, default_string)


@op("CategoryMapper", since=1, domain=ML)
def category_mapper(
    x: np.ndarray,
    *,
    cats_int64s: Sequence[int] | None = None,
    cats_strings: Sequence[str] | None = None,
    default_int64: int = -1,
    default_string: str = "_Unused",
) -> np.ndarray:
    """string -> int64 through cats_strings[i] -> cats_int64s[i], or int64 -> string."""
    ints = np.asarray(cats_int64s or (), dtype=np.int64)
    strs = np.array(list(cats_strings or ()), dtype=object)
    if ints.shape[0] != strs.shape[0]:
        raise ValueError(f"CategoryMapper: {strs.shape[0]} strings but {ints.shape[0]} ints")
    if x.dtype == object:
        return _lookup(x, strs, ints, default_int64)
    return _lookup(x.astype(np.int64), ints, strs, default_string)


@op("OneHotEncoder", since=1, domain=ML)
def one_hot_encoder(
    x: np.ndarray,
    *,
    cats_int64s: Sequence[int] | None = None,
    cats_strings: Sequence[str] | None = None,
    zeros: int = 1,
) -> np.ndarray:
    """X (...) -> (..., n_cats) float32 with a 1 at each value's category.

    Numeric inputs are truncated to int64 first; zeros=0 makes an unknown value an error.
    """
    strings, table, eye = memo(_one_hot_table, cats_int64s, cats_strings)
    if strings:
        if x.dtype != object:
            raise TypeError("OneHotEncoder: cats_strings needs a string input")
        v = x
    else:
        if x.dtype == object:
            raise TypeError("OneHotEncoder: cats_int64s needs a numeric input")
        v = x.astype(np.int64)
    idx = _map_values(v, table, None, -1, np.int64)
    if not zeros and (idx < 0).any():
        bad = v.reshape(-1)[int(np.argmax(idx.reshape(-1) < 0))]
        raise ValueError(f"OneHotEncoder: value {bad!r} is not a known category and zeros=0")
    # row -1 of `eye` is all zeros: unknown values (zeros=1) one-hot to nothing
    return eye.take(idx, axis=0)


def _one_hot_table(
    cats_int64s: Sequence[int] | None, cats_strings: Sequence[str] | None
) -> tuple[bool, dict[Any, int], np.ndarray]:
    """(string categories?, category -> index, (n + 1, n) float32 identity + zero row)."""
    if cats_strings:
        cats: list[Any] = list(cats_strings)
    elif cats_int64s:
        cats = [int(c) for c in cats_int64s]
    else:
        raise ValueError("OneHotEncoder: one of cats_int64s / cats_strings is required")
    keys = np.array(cats, dtype=object if cats_strings else np.int64)
    table, _ = _table(keys, np.arange(len(cats), dtype=np.int64))
    eye = np.vstack([np.eye(len(cats), dtype=np.float32), np.zeros((1, len(cats)), np.float32)])
    return bool(cats_strings), table, eye


@op("DictVectorizer", since=1, domain=ML)
def dict_vectorizer(
    x: Mapping[Any, Any] | Sequence[Mapping[Any, Any]],
    *,
    int64_vocabulary: Sequence[int] | None = None,
    string_vocabulary: Sequence[str] | None = None,
) -> np.ndarray:
    """map(key -> value) -> (1, len(vocabulary)) in vocabulary order, absent keys 0.

    A list of maps gives one row per map.
    """
    vocab = list(string_vocabulary) if string_vocabulary else list(int64_vocabulary or ())
    if not vocab:
        raise ValueError("DictVectorizer: one of int64_vocabulary / string_vocabulary is required")
    maps = [x] if isinstance(x, Mapping) else list(x)
    sample = next((v for m in maps for v in m.values()), 0.0)
    if isinstance(sample, str):
        dtype: Any = object
        zero: Any = ""
    else:
        dtype = (
            np.asarray(sample).dtype
            if isinstance(sample, np.generic)
            else (np.int64 if isinstance(sample, int | np.integer) else np.float32)
        )
        zero = 0
    out = np.full((len(maps), len(vocab)), zero, dtype=dtype)
    pos = {k: i for i, k in enumerate(vocab)}
    for r, m in enumerate(maps):
        for k, v in m.items():
            j = pos.get(k.item() if isinstance(k, np.generic) else k)
            if j is not None:
                out[r, j] = v
    return out


def _to_string(v: Any) -> str:
    """Strings pass through; floats print as C++ std::to_string(float) does ("%f")."""
    return v if isinstance(v, str) else f"{float(np.float32(v)):.6f}"


def _to_int64(v: Any) -> int:
    """Through float32 and truncation, like onnxruntime's static_cast<int64_t>(float)."""
    return int(np.float32(v))


@op("CastMap", since=1, domain=ML)
def cast_map(
    x: Mapping[int, Any], *, cast_to: str = "TO_FLOAT", map_form: str = "DENSE", max_map: int = 1
) -> np.ndarray:
    """map(int64 -> string|float) -> (1, n) tensor of the values in key order.

    DENSE: n = len(map). SPARSE: n = max_map, value at position key, other slots
    padded with 0 (or "0.f" for strings, as onnxruntime does).
    """
    conv: Callable[[Any], Any]
    if cast_to == "TO_FLOAT":
        conv, dtype, pad = np.float32, np.float32, np.float32(0)
    elif cast_to == "TO_INT64":
        conv, dtype, pad = _to_int64, np.int64, 0
    elif cast_to == "TO_STRING":
        conv, dtype, pad = _to_string, object, "0.f"
    else:
        raise ValueError(
            f"CastMap: cast_to must be TO_FLOAT, TO_STRING or TO_INT64, got '{cast_to}'"
        )
    items = sorted((int(k), v) for k, v in x.items())
    if map_form == "DENSE":
        return np.array([conv(v) for _, v in items], dtype=dtype).reshape(1, -1)
    if map_form != "SPARSE":
        raise ValueError(f"CastMap: map_form must be DENSE or SPARSE, got '{map_form}'")
    if items and items[0][0] < 0:
        raise ValueError("CastMap: negative keys are not allowed with map_form=SPARSE")
    out = np.full((1, max_map), pad, dtype=dtype)
    for k, v in items:
        if k < max_map:
            out[0, k] = conv(v)
    return out


@functools.lru_cache(maxsize=64)
def _row_dicts(n: int) -> Callable[..., list[dict[Any, float]]]:
    """rows, k0..k{n-1} -> [{k0: row[0], ...} for row in rows], as one comprehension.

    A dict display with the keys bound as arguments builds each map about twice as
    fast as dict(zip(keys, row)); ZipMap's per-row dicts dominate small classifiers.
    The source holds generated names only, never a label.
    """
    keys = ", ".join(f"k{i}" for i in range(n))
    vals = ", ".join(f"v{i}" for i in range(n))
    items = ", ".join(f"k{i}: v{i}" for i in range(n))
    return eval(f"lambda rows, {keys}: [{{{items}}} for {vals}, in rows]")


def _zip_labels(ints: Sequence[int] | None, strings: Sequence[str] | None) -> list[Any]:
    return list(strings) if strings else [int(v) for v in (ints or ())]


@op("ZipMap", since=1, domain=ML)
def zip_map(
    x: np.ndarray,
    *,
    classlabels_int64s: Sequence[int] | None = None,
    classlabels_strings: Sequence[str] | None = None,
) -> list[dict[Any, float]]:
    """(N, C) scores -> list of N dicts {class label: score}."""
    labels = memo(_zip_labels, classlabels_int64s, classlabels_strings)
    if not labels:
        raise ValueError("ZipMap: one of classlabels_int64s / classlabels_strings is required")
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    if rows.ndim != 2 or rows.shape[1] != len(labels):
        raise ValueError(f"ZipMap: input shape {list(x.shape)} does not match {len(labels)} labels")
    if len(labels) <= _MAX_DISPLAY_KEYS:
        return _row_dicts(len(labels))(rows.tolist(), *labels)
    return [dict(zip(labels, row, strict=True)) for row in rows.tolist()]
