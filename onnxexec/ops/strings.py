"""String ops: StringNormalizer, RegexFullMatch, StringSplit, StringConcat, TfIdfVectorizer.

String tensors are object arrays of Python str.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final

import numpy as np

from onnxexec.ops.registry import op


def _check_strings(x: np.ndarray, op_name: str) -> None:
    if x.dtype.kind not in "OU":
        raise TypeError(f"{op_name}: expected a string tensor, got {x.dtype}")


def _strings(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


@op("StringNormalizer", since=10)
def string_normalizer(
    x: np.ndarray,
    *,
    case_change_action: str = "NONE",
    is_case_sensitive: int = 0,
    locale: str | None = None,
    stopwords: Sequence[str] | None = None,
) -> np.ndarray:
    """[C] or [1, C] strings -> stopwords removed, then case changed.

    Stopwords are whole elements (compared case-insensitively unless
    is_case_sensitive). When every element is dropped the result is [""] with
    shape [1] or [1, 1]. `locale` is accepted; case mapping is Unicode's.
    """
    _check_strings(x, "StringNormalizer")
    if (x.ndim == 2 and x.shape[0] != 1) or x.ndim not in (1, 2):
        raise ValueError(f"StringNormalizer: input must be [C] or [1, C], got {list(x.shape)}")
    if case_change_action not in ("NONE", "LOWER", "UPPER"):
        raise ValueError(f"StringNormalizer: unknown case_change_action '{case_change_action}'")
    words = [str(w) for w in x.reshape(-1).tolist()]
    if stopwords:
        if is_case_sensitive:
            stops = set(stopwords)
            words = [w for w in words if w not in stops]
        else:
            stops = {s.lower() for s in stopwords}
            words = [w for w in words if w.lower() not in stops]
    if case_change_action == "LOWER":
        words = [w.lower() for w in words]
    elif case_change_action == "UPPER":
        words = [w.upper() for w in words]
    if not words:
        words = [""]
    return _strings(words, (len(words),) if x.ndim == 1 else (1, len(words)))


# RE2 syntax that Python's `re` spells differently (RE2 wiki, "Syntax").
_POSIX_CLASSES: Final = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}


@lru_cache(maxsize=64)
def _compile_re2(pattern: str) -> re.Pattern[str]:
    """Compile an RE2 pattern with Python's re, translating the common differences:
    \\Q...\\E literals, \\z, \\C, [[:class:]] / [[:^class:]] POSIX classes.
    """
    py = re.sub(r"\\Q(.*?)(?:\\E|$)", lambda m: re.escape(m.group(1)), pattern, flags=re.S)
    py = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", py)
    py = re.sub(r"(?<!\\)((?:\\\\)*)\\C", r"\1.", py)

    def posix(m: re.Match[str]) -> str:
        neg, name = m.group(1), m.group(2)
        if name not in _POSIX_CLASSES:
            raise ValueError(f"RegexFullMatch: unknown POSIX class [:{name}:]")
        if neg:
            raise ValueError("RegexFullMatch: negated POSIX classes are not supported")
        return _POSIX_CLASSES[name]

    py = re.sub(r"\[:(\^?)([a-z]+):\]", posix, py)
    try:
        return re.compile(py)
    except re.error as e:
        raise ValueError(f"RegexFullMatch: invalid pattern {pattern!r}: {e}") from None


@op("RegexFullMatch", since=20)
def regex_full_match(x: np.ndarray, *, pattern: str | None = None) -> np.ndarray:
    """Elementwise: does the whole string match `pattern` (RE2 syntax)? -> bool."""
    _check_strings(x, "RegexFullMatch")
    if pattern is None:
        raise ValueError("RegexFullMatch: the pattern attribute is required")
    rx = _compile_re2(pattern)
    flat = [rx.fullmatch(str(s)) is not None for s in x.reshape(-1).tolist()]
    return np.array(flat, dtype=np.bool_).reshape(x.shape)


@op("StringSplit", since=20)
def string_split(
    x: np.ndarray, *, delimiter: str | None = None, maxsplit: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Split each string -> (X.shape + [max parts], padded with "", X.shape int64 counts).

    No/empty delimiter splits on runs of whitespace and drops empty parts (Python's
    str.split()); otherwise consecutive delimiters give empty strings.
    """
    _check_strings(x, "StringSplit")
    sep = delimiter or None
    limit = -1 if maxsplit is None else int(maxsplit)
    parts = [str(s).split(sep, limit) for s in x.reshape(-1).tolist()]
    counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    width = max((len(p) for p in parts), default=0)
    padded = [p + [""] * (width - len(p)) for p in parts]
    flat = [s for p in padded for s in p]
    return _strings(flat, (*x.shape, width)), counts


@op("StringConcat", since=20)
def string_concat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise x + y with numpy broadcasting."""
    _check_strings(x, "StringConcat")
    _check_strings(y, "StringConcat")
    xb, yb = np.broadcast_arrays(x.astype(object), y.astype(object))
    flat = [
        str(a) + str(b)
        for a, b in zip(xb.reshape(-1).tolist(), yb.reshape(-1).tolist(), strict=True)
    ]
    return _strings(flat, xb.shape)


def _ngram_table(
    pool: Sequence[Any],
    ngram_counts: Sequence[int],
    ngram_indexes: Sequence[int],
    min_gram: int,
    max_gram: int,
) -> dict[tuple[Any, ...], int]:
    """{n-gram tuple: output column} for the pool's n-grams of length min..max.

    ngram_counts[i] is where the (i+1)-grams start in the pool (spec).
    """
    table: dict[tuple[Any, ...], int] = {}
    k = 0  # n-gram number in pool order, indexes ngram_indexes
    for i, start in enumerate(ngram_counts):
        n = i + 1
        end = ngram_counts[i + 1] if i + 1 < len(ngram_counts) else len(pool)
        for s in range(start, end, n):
            if min_gram <= n <= max_gram:
                table.setdefault(tuple(pool[s : s + n]), int(ngram_indexes[k]))
            k += 1
    return table


@op("TfIdfVectorizer", since=9)
def tfidf_vectorizer(
    x: np.ndarray,
    *,
    max_gram_length: int,
    max_skip_count: int,
    min_gram_length: int,
    mode: str,
    ngram_counts: Sequence[int],
    ngram_indexes: Sequence[int],
    pool_int64s: Sequence[int] | None = None,
    pool_strings: Sequence[str] | None = None,
    weights: Sequence[float] | None = None,
) -> np.ndarray:
    """[C] or [B, C] tokens -> [O] or [B, O] float32 n-gram scores, O = max(ngram_indexes) + 1.

    An n-gram takes tokens skip+1 apart for every skip in 0..max_skip_count, so
    one row can count the same n-gram at several skips; unigrams count once.
    TF = counts, IDF = weight (or 1) where count > 0, TFIDF = weight * count.
    """
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ValueError(f"TfIdfVectorizer: mode must be TF, IDF or TFIDF, got '{mode}'")
    if x.ndim not in (1, 2):
        raise ValueError(f"TfIdfVectorizer: input must be [C] or [B, C], got {list(x.shape)}")
    strings = x.dtype.kind in "OU"
    pool: Sequence[Any] = list(pool_strings or ()) if strings else list(pool_int64s or ())
    if not pool:
        raise ValueError("TfIdfVectorizer: pool_strings (string input) or pool_int64s is required")
    table = _ngram_table(pool, ngram_counts, ngram_indexes, min_gram_length, max_gram_length)
    width = max(ngram_indexes) + 1
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    counts = np.zeros((rows.shape[0], width), dtype=np.int64)
    for r, row in enumerate(rows.tolist()):
        c = len(row)
        for start in range(c):
            for skip in range(max_skip_count + 1):
                d = skip + 1
                for n in range(max(min_gram_length, 1), max_gram_length + 1):
                    if n == 1 and skip > 0:
                        continue  # unigrams do not depend on the skip
                    last = start + d * (n - 1)
                    if last >= c:
                        break
                    col = table.get(tuple(row[start : last + 1 : d]))
                    if col is not None:
                        counts[r, col] += 1
    w = None
    if weights:
        # weights[k] belongs to the k-th n-gram of the pool, i.e. to column ngram_indexes[k]
        if len(weights) != len(ngram_indexes):
            raise ValueError(
                f"TfIdfVectorizer: {len(weights)} weights for {len(ngram_indexes)} n-grams"
            )
        w = np.zeros(width, dtype=np.float32)
        w[np.asarray(ngram_indexes, dtype=np.int64)] = np.asarray(weights, dtype=np.float32)
    if mode == "TF":
        out = counts.astype(np.float32)
    elif mode == "IDF":
        out = (counts > 0).astype(np.float32) * (w if w is not None else np.float32(1))
    else:
        out = counts.astype(np.float32) * (w if w is not None else np.float32(1))
    out = out.astype(np.float32)
    return out.reshape(width) if x.ndim == 1 else out
