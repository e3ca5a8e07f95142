"""Arrays between inaccessible pages, for tests that a kernel reads or writes nothing
outside the buffers it is given: an access past the end (or before the start) dies
with SIGSEGV instead of reading a neighbour's bytes."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def guarded(shape: tuple[int, ...], dtype=np.float32, at: str = "end") -> Iterator[np.ndarray]:
    """A C-contiguous array of `shape`, filled with standard normals (zeros for
    integers), in fresh pages with an inaccessible page before and after them. `at`:
    "end" places its last byte at the end of a page (the page after it faults), "start"
    its first byte at the start of a page (the page before it faults). The protection
    is lifted on exit; the map goes when the last view of it does."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    nbytes = n * dt.itemsize
    page = mmap.PAGESIZE
    pages = max(1, -(-nbytes // page))
    buf = mmap.mmap(-1, (pages + 2) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    offset = page if at == "start" else (pages + 1) * page - nbytes
    a = np.frombuffer(buf, dtype=dt, count=n, offset=offset).reshape(shape)
    if dt.kind == "f":
        a[...] = np.random.default_rng(n).standard_normal(shape)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base, page, 0) == 0
    assert libc.mprotect(base + (pages + 1) * page, page, 0) == 0
    try:
        yield a
    finally:
        libc.mprotect(base, (pages + 2) * page, mmap.PROT_READ | mmap.PROT_WRITE)
