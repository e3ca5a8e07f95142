"""Kernel object code on disk, written by a process that ran numba and read by one
that has not imported it.

One file per (kernel, call key): the overload's ELF object (numba's own cached object
code: the kernel, every jitted function it calls, and its CPython wrapper), the names
of the wrapper and of its environment variable, and the environment's constants.
Files sit in a folder named by a stamp of everything the code depends on: every
kernels/*.py (a caller embeds its callees' code), numba's and llvmlite's versions,
the Python version, this CPU's model and feature flags (LLVM compiled for the host
CPU) and the ONNXEXEC_ISA level (kernels/isa.py) the gates ran at. A stale folder
is never read, and the first write under a new stamp removes the old folders. A
record can also say why an overload can't be loaded without numba (a `prange` kernel
calls numba's threading layer), so later processes go to numba at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import platform
import shutil
import sys
import tempfile
from functools import cache
from importlib import metadata
from typing import Any, Final

from onnxexec.kernels import OBJECT_ATTR, isa, sources_digest
from onnxexec.kernels.objload import numba_rt
from onnxexec.kernels.objload.elf import ObjectLoadError, load_object

log = logging.getLogger(__name__)
FORMAT: Final = 2


def _cpu_identity() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def _numba_settings() -> str:
    """numba's environment settings that change generated code (NUMBA_OPT,
    NUMBA_BOUNDSCHECK, NUMBA_CPU_NAME, ...); where the cache lives and thread counts
    don't."""
    skip = {"NUMBA_CACHE_DIR", "NUMBA_NUM_THREADS", "NUMBA_DISABLE_JIT"}
    return repr(
        sorted((k, v) for k, v in os.environ.items() if k.startswith("NUMBA_") and k not in skip)
    )


@cache
def stamp() -> str:
    h = hashlib.sha256()
    for part in (
        str(FORMAT),
        sources_digest(),
        _version("numba"),
        _version("llvmlite"),
        sys.version,
        platform.machine(),
        _cpu_identity(),
        isa.level(),  # the gates' choices are compiled into the kernels
        _numba_settings(),
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def _root() -> str:
    custom = os.environ.get("NUMBA_CACHE_DIR")
    if custom:
        return os.path.join(custom, "onnxexec-objload")
    return os.path.join(os.path.dirname(os.path.dirname(__file__)), "__pycache__", "objload")


def _path(kernel: str, key: tuple[Any, ...]) -> str:
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
    return os.path.join(_root(), stamp(), f"{kernel}-{digest}.pkl")


def exists(kernel: str, key: tuple[Any, ...]) -> bool:
    return os.path.exists(_path(kernel, key))


def read(kernel: str, key: tuple[Any, ...]) -> dict[str, Any] | None:
    """The record for this kernel and key, or None when there is none (or it is
    unreadable, or written for another key)."""
    try:
        with open(_path(kernel, key), "rb") as f:
            record = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    return record


def _write(kernel: str, key: tuple[Any, ...], record: dict[str, Any]) -> None:
    path = _path(kernel, key)
    folder = os.path.dirname(path)
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
            for old in os.listdir(os.path.dirname(folder)):
                if old != stamp():
                    shutil.rmtree(os.path.join(os.path.dirname(folder), old), ignore_errors=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    except OSError:
        return  # a read-only install keeps using numba for kernels it has no record of
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(record, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)  # atomic: a concurrent reader sees no file or a whole one
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _checked(record: dict[str, Any], *symbols: str) -> dict[str, Any]:
    """The record, or one saying why its object can't be linked here (e.g. a prange
    kernel needs numba's threading layer)."""
    try:
        obj = load_object(record["code"], numba_rt.resolve)
        for name in symbols:
            obj.address(record[name])
    except ObjectLoadError as e:
        return {k: v for k, v in record.items() if k not in ("code", "sha256")} | {
            "unsupported": str(e)
        }
    return record


def _record_from(cres: Any, key: tuple[Any, ...]) -> dict[str, Any] | None:
    """A loadable record of numba's compile result, one saying why it isn't loadable,
    or None when its object code wasn't kept."""
    fndesc = cres.fndesc
    record: dict[str, Any] = {"key": key, "name": fndesc.qualname.split(".")[-1]}
    code = getattr(cres.library, OBJECT_ATTR, None)
    if code is None:
        return None  # no object code kept for this library (see kernels/__init__.py)
    try:
        consts = pickle.dumps(list(cres.environment.consts))
    except Exception as e:  # a constant that won't pickle
        return {**record, "unsupported": f"{type(e).__name__}: {e}"}
    if b"numba" in consts or b"llvmlite" in consts:
        # unpickling them would import numba, which is what loading this way avoids
        return {**record, "unsupported": "environment constants refer to numba"}
    record.update(
        code=code,
        sha256=hashlib.sha256(code).hexdigest(),
        wrapper=fndesc.llvm_cpython_wrapper_name,
        env=cres.target_context.get_env_name(fndesc),
        consts=consts,
    )
    return _checked(record, "wrapper", "env")


def save(kernel: str, key: tuple[Any, ...], cres: Any) -> None:
    """Record numba's compile result `cres` for this kernel and call key."""
    try:
        record = _record_from(cres, key)
        if record is not None:
            _write(kernel, key, record)
    except Exception as e:  # recording is an optimisation: never fail over it
        log.debug("objload: not recording %s: %s", kernel, e)


def save_cfunc(kernel: str, cfunc: Any) -> None:
    """Record a compiled numba cfunc: its library's object code and C wrapper's name."""
    try:
        code = getattr(cfunc._library, OBJECT_ATTR, None)
        if code is None:
            return
        key = ("cfunc",)
        record = {
            "key": key,
            "name": cfunc.__name__,
            "code": code,
            "sha256": hashlib.sha256(code).hexdigest(),
            "wrapper": cfunc.native_name,
        }
        _write(kernel, key, _checked(record, "wrapper"))
    except Exception as e:  # recording is an optimisation: never fail over it
        log.debug("objload: not recording %s: %s", kernel, e)


def _linked(record: dict[str, Any]) -> Any:
    if "unsupported" in record:
        raise ObjectLoadError(record["unsupported"])
    if hashlib.sha256(record["code"]).hexdigest() != record["sha256"]:
        # machine code that changed on disk is never run
        raise ObjectLoadError("object code does not match its checksum")
    return load_object(record["code"], numba_rt.resolve)


def build_cfunc(record: dict[str, Any]) -> tuple[int, Any]:
    """(C address, object to keep alive) of a recorded cfunc."""
    obj = _linked(record)
    return obj.address(record["wrapper"]), obj


def build(module: Any, record: dict[str, Any]) -> Any:
    """A callable for a record that has code; raises ObjectLoadError if it can't load."""
    obj = _linked(record)
    consts = pickle.loads(record["consts"])
    return numba_rt.make_callable(
        module,
        record["name"],
        obj.address(record["wrapper"]),
        obj.address(record["env"]),
        consts,
        obj,
    )
