"""A prefix tree over token texts, as llama.cpp's naive_trie / token matcher.

Matching walks the input only as far as some token continues, so the cost per input
position is the length of the longest token prefix found there, not the length of
the longest token in the vocabulary (one crafted 70k-character token made the
slice-every-length loops quadratic).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

_SHIFT = 21  # an item is a byte or a code point (< 2^21)


class Trie:
    """Keys are sequences of ints (bytes, or code points of a str via map(ord, s))."""

    __slots__ = ("_next", "_size", "_value")

    def __init__(self) -> None:
        self._next: dict[int, int] = {}  # (node << 21 | item) -> child node
        self._value: dict[int, int] = {}  # node -> value of the key ending there
        self._size = 1  # node 0 is the root

    def add(self, key: Iterable[int], value: int) -> None:
        """Insert `key`; a later value for the same key replaces the earlier one."""
        node = 0
        nxt = self._next
        for c in key:
            k = node << _SHIFT | c
            child = nxt.get(k)
            if child is None:
                child = nxt[k] = self._size
                self._size += 1
            node = child
        self._value[node] = value

    def matches(self, items: Sequence[int], start: int) -> Iterator[tuple[int, int]]:
        """(end, value) of every key equal to items[start:end], shortest first."""
        node, nxt, val = 0, self._next, self._value
        for end in range(start, len(items)):
            child = nxt.get(node << _SHIFT | items[end])
            if child is None:
                return
            node = child
            v = val.get(node)
            if v is not None:
                yield end + 1, v

    def prefix_len(self, items: Sequence[int], start: int) -> int:
        """How many items from `start` follow some key's path (whole key or not)."""
        node, nxt, n = 0, self._next, 0
        for end in range(start, len(items)):
            child = nxt.get(node << _SHIFT | items[end])
            if child is None:
                break
            node, n = child, n + 1
        return n
