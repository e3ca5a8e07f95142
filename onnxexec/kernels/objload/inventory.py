"""What the per-user kernel store holds, and clearing it (`onnxexec cache info|clear`).

Only reads record headers (JSON) and file sizes; nothing here links or runs code.
Clearing removes only the store's own folders (`objload/`, `numba/`), never anything
else under a root someone pointed ONNXEXEC_CACHE_DIR at.

An entry is a folder of one configuration and sources digest: `objload/<config>/
<sources>` (store.py) or `numba/<sources>-<isa>` (objload/numba_cache.py). It is
current when this process would read it: its config is this one and its sources
digest is that of some kernel module as the files are now (objload/sources.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from onnxexec.kernels import cachedir
from onnxexec.kernels.objload import sources, store

_OWN = ("objload", "numba")


@dataclass
class ConfigEntries:
    """The entries of one configuration folder."""

    kind: str  # "objload" records or "numba" cache files
    name: str  # folder: <config stamp>/<sources>, <config stamp>/warmed, <sources>-<isa>
    current: bool  # what this process would read
    same_config: bool = False  # objload: this configuration, older sources if not current
    files: int = 0
    size: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoreInfo:
    root: str
    exists: bool
    mode: str  # e.g. "0700", or "" when missing
    owner_ok: bool
    usable: bool  # user-only, so read and written
    size: int
    configs: list[ConfigEntries]


def _header(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(12)
            if head[:8] != store.MAGIC or len(head) < 12:
                return None
            (size,) = struct.unpack_from("<I", head, 8)
            header = json.loads(f.read(min(size, 1 << 20)))
        return header if isinstance(header, dict) else None
    except (OSError, ValueError):
        return None


def _record_kind(header: dict[str, Any] | None) -> str:
    if header is None:
        return "unreadable"
    if header.get("unsupported"):
        return "numba-only"
    return "cfunc" if header.get("key") == repr(("cfunc",)) else "kernel"


def _folder_entries(kind: str, path: str, current: bool) -> ConfigEntries:
    entry = ConfigEntries(kind, os.path.basename(path), current)
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(dirpath, name)
            try:
                entry.size += os.lstat(full).st_size
            except OSError:
                continue
            entry.files += 1
            if kind == "objload" and name.endswith(store.SUFFIX):
                header = _header(full)
                entry.by_kind[_record_kind(header)] += 1
                if header is not None and not entry.config:
                    entry.config = dict(header.get("config") or {})
            elif kind == "numba":
                entry.by_kind[os.path.splitext(name)[1].lstrip(".") or "other"] += 1
    return entry


def _folders(kind: str, top: str) -> list[tuple[str, str, bool]]:
    """(name, path, current) of the entry folders under `top` (objload/ or numba/)."""
    digests = sources.current_digests()
    found = []
    for name in sorted(os.listdir(top)):
        path = os.path.join(top, name)
        if not os.path.isdir(path) or os.path.islink(path):
            continue  # objload/secret stays: records are signed with it
        if kind == "numba":
            current = {os.path.basename(cachedir.numba_cache_dir(d)) for d in digests}
            found.append((name, path, name in current))
            continue
        ours = name == store.stamp()
        for sub in sorted(os.listdir(path)):
            full = os.path.join(path, sub)
            if os.path.isdir(full) and not os.path.islink(full):
                now = ours and (sub == "warmed" or sub in {d[:16] for d in digests})
                found.append((f"{name}/{sub}", full, now))
    return found


def info() -> StoreInfo:
    """The store's location, permissions and entries per kind and configuration."""
    root = cachedir.root()
    try:
        st = os.stat(root)
    except OSError:
        return StoreInfo(root, False, "", True, False, 0, [])
    owner_ok = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    configs = []
    for kind in _OWN:
        top = os.path.join(root, kind)
        if not os.path.isdir(top):
            continue
        for name, path, current in _folders(kind, top):
            configs.append(_folder_entries(kind, path, current))
            configs[-1].name = name
            configs[-1].same_config = kind == "objload" and name.startswith(store.stamp() + "/")
    usable = cachedir.store_dir() is not None
    size = sum(c.size for c in configs)
    return StoreInfo(root, True, f"{stat.S_IMODE(st.st_mode):04o}", owner_ok, usable, size, configs)


def clear(stale_only: bool = False) -> tuple[int, int]:
    """Remove the store's entries (only other configurations' with `stale_only`);
    returns (folders removed, bytes freed)."""
    root = cachedir.root()
    removed = freed = 0
    for kind in _OWN:
        top = os.path.join(root, kind)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for _name, path, current in _folders(kind, top):
            if stale_only and current:
                continue
            freed += _folder_entries(kind, path, False).size
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
        if kind == "objload":  # config folders left empty
            for name in os.listdir(top):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(top, name))
    return removed, freed
