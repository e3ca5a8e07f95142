"""Where compiled kernels live: one store per user, shared by tests, CLI and API.

The store is `$ONNXEXEC_CACHE_DIR` if set, else `$XDG_CACHE_HOME/onnxexec`, else
`~/.cache/onnxexec`, whatever the working directory or where onnxexec is installed
(the source tree's tests and an installed CLI find the same records). Inside:

    objload/<config>/<kernel>-<key>.oxk   kernel records (kernels/objload/store.py)
    objload/secret                       the store's record-signing key (0600)
    numba/<sources>-<isa>/...            numba's own cache (NUMBA cache files)

The store is created with user-only permissions (0700 folders; records are written
0600). A store folder that another user could write to (group/world-writable, or
owned by someone else) is not used at all, with one warning: anyone who can write
records there can make this process run their machine code. A missing, read-only or
refused store only means kernels are compiled, never an error.
"""

from __future__ import annotations

import logging
import os
import stat
from typing import Final

log = logging.getLogger(__name__)

ENV_VAR: Final = "ONNXEXEC_CACHE_DIR"
_warned: set[str] = set()


def root() -> str:
    """The store's folder (it may not exist yet)."""
    custom = os.environ.get(ENV_VAR)
    if custom:
        return os.path.abspath(os.path.expanduser(custom))
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "onnxexec")


def isa_level() -> str:
    """The ONNXEXEC_ISA level the kernels' CPU-feature gates run at (kernels/isa.py
    where it exists; otherwise the requested cap, "host" when none)."""
    try:
        from onnxexec.kernels import isa  # type: ignore[attr-defined]

        return str(isa.level())
    except ImportError:
        return os.environ.get("ONNXEXEC_ISA", "") or "host"


def _unsafe(path: str, st: os.stat_result) -> str | None:
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not this user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def safe_dir(path: str, create: bool) -> bool:
    """True when `path` (under the store) is a folder only this user can write, creating
    it (0700) if asked. An unsafe folder is warned about once and refused."""
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    problem = _unsafe(path, st)
    if problem is not None:
        if path not in _warned:
            _warned.add(path)
            log.warning(
                "onnxexec: not using the kernel store: %s; kernels will be compiled", problem
            )
        return False
    return True


def store_dir(*parts: str, create: bool = False) -> str | None:
    """`root()/parts...` when it and every folder from the store's root down are safe
    (see module docstring), else None. `create` makes missing folders 0700."""
    path = root()
    if not safe_dir(path, create):
        return None
    for part in parts:
        path = os.path.join(path, part)
        if not safe_dir(path, create):
            return None
    return path


def numba_cache_dir(sources: str) -> str:
    """numba's cache folder for kernels of this source digest and ISA level: another
    source or level is another folder, so no process ever deletes what another one,
    of another configuration, compiled."""
    return os.path.join(root(), "numba", f"{sources[:16]}-{isa_level()}")
