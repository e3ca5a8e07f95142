"""The per-user store of compiled kernels as tools above the runtime see it (the CLI's
`cache` and `warmup` commands): what it holds, clearing it, and which models
`onnxexec warmup` already readied. The store itself is kernels/objload's; this module
keeps the CLI off the kernels package."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

from onnxexec.kernels import cachedir, sources_digest
from onnxexec.kernels.objload import store
from onnxexec.kernels.objload.inventory import StoreInfo, clear, info
from onnxexec.kernels.objload.watch import compiles, creating, lazy_compiles, subscribe

__all__ = [
    "StoreInfo",
    "clear",
    "compiles",
    "creating",
    "info",
    "lazy_compiles",
    "mark_warmed",
    "model_id",
    "subscribe",
    "warmed",
]


def model_id(path: str) -> str:
    """What identifies a model file for warm-up: its real path, size and mtime, and
    the kernel sources (a kernel edit may change which kernels it needs)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    what = f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{sources_digest()}"
    return hashlib.sha256(what.encode()).hexdigest()[:24]


def _marker(mid: str, create: bool = False) -> str | None:
    # beside the records of this configuration (numba, ISA, CPU): a new
    # configuration, or `cache clear`, forgets it with them
    folder = cachedir.store_dir("objload", store.stamp(), "warmed", create=create)
    return None if folder is None else os.path.join(folder, f"{mid}.json")


def warmed(mid: str) -> bool:
    """Whether `onnxexec warmup` readied model `mid` for this configuration."""
    path = _marker(mid)
    return path is not None and os.path.isfile(path)


def mark_warmed(mid: str, what: str) -> None:
    """Note that model `mid` (`what`: its path, for people reading the store) is ready."""
    path = _marker(mid, create=True)
    if path is None:
        return  # no usable store: nothing was stored either
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"model": what}, f)
    os.replace(tmp, path)
