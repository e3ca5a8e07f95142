"""Kernel object code on disk, written by a process that ran numba and read by one
that has not imported it. Records are plain data: reading one parses JSON and bytes
and never runs code (no pickle anywhere in this file's reading path).

Where: `<store>/objload/<config>/<sources>/<kernel>-<key>.oxk` (kernels/cachedir.py:
one store per user, 0700 folders, 0600 files, refused when others can write it).
`<config>` is a hash of what every kernel's code depends on (see `config()`): numba's
and llvmlite's versions, the Python version, the machine, this CPU's model and flags
(LLVM compiles for the host), the ONNXEXEC_ISA level and numba's code-changing
NUMBA_* settings. `<sources>` is the first 16 hex digits of the kernel's own sources
digest (objload/sources.py: its module and the kernel modules it imports,
transitively: a caller embeds its callees' code), so editing one kernel module
invalidates only the records of the kernels that can contain its code. Folders of
other configurations or sources are never read and never deleted by a write
(`onnxexec cache clear [--stale]` removes them).

Record file format (version 4), little-endian:

    bytes 0-7     magic b"OXKREC4\\n"
    bytes 8-11    u32 H, the header's length (at most 1 MiB)
    H bytes       header: UTF-8 JSON object (below)
    the rest      the overload's ELF object code, exactly header["code_size"] bytes

Header fields, all required:
    kernel        the kernel's qualified name ("onnxexec.kernels.ml.ml_scores._linear")
    key           repr() of its call key (argkey.call_key, or ("cfunc",))
    config        the dict `config()` returns for the writing process
    sources       the kernel's sources digest (sources.digest of its module), in full
    name          the Python-visible name of the compiled function
    wrapper       symbol of its CPython wrapper (a cfunc: its C entry point)
    env           symbol of its environment slot, or null (cfunc)
    consts        the environment's constants: a list of {"dtype": "<f4"}
    unsupported   null, or why this overload can't run without numba (a prange
                  kernel calls numba's threading layer): the reader goes to numba
    code_size     the length of the object code
    mac           hex HMAC-SHA256, keyed by the store's secret (`objload/secret`, 32
                  random bytes, 0600), of: magic + the header's canonical JSON
                  without "mac" (sorted keys, no spaces) + the object code

A record is used only when everything matches: magic, sizes, field types, the kernel,
key, sources and config this process asks for, and the MAC. So a truncated file, a record
copied over another kernel's file, one from another store or machine, machine code
replaced with a plain checksum recomputed, a pickle, a bad ELF header or a missing
field are each logged once (a warning), ignored (numba compiles the overload) and
replaced by a good record when the process exits.

Threat model: the store defends against corruption, against records made elsewhere
and against other users (they can't write a user-only store, and a store they could
write is refused). A process running as the same user can read the secret and write
valid records: it can run code as this user anyway, so that is out of scope. The
object code itself is trusted once its MAC checks; numba serializes some Python
objects into it (numba_rt._unpickle reads those), which is why only this user's own
records are ever linked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import platform
import struct
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, Final

import numpy as np

from onnxexec.kernels import OBJECT_ATTR, cachedir
from onnxexec.kernels.objload import numba_rt, sources
from onnxexec.kernels.objload.elf import ObjectLoadError, load_object

log = logging.getLogger(__name__)
FORMAT: Final = 4
MAGIC: Final = b"OXKREC4\n"
SUFFIX: Final = ".oxk"
_MAX_HEADER: Final = 1 << 20
_FIELDS: Final[dict[str, type | tuple[type, ...]]] = {
    "kernel": str, "key": str, "config": dict, "sources": str, "name": str, "wrapper": str,
    "env": (str, type(None)), "consts": list, "unsupported": (str, type(None)),
    "code_size": int, "mac": str,
}  # fmt: skip
_bad: set[str] = set()  # records found invalid in this process: logged once, rewritten


@dataclass(frozen=True)
class Record:
    """One overload: its object code and the symbols / constants to call it."""

    kernel: str
    key: str
    name: str
    wrapper: str
    env: str | None
    consts: tuple[np.dtype[Any], ...]
    unsupported: str | None
    code: bytes
    path: str = ""


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
def config() -> dict[str, Any]:
    """Everything every record's machine code depends on but its sources (a record's
    own `sources` field), as plain data."""
    return {
        "format": FORMAT,
        "numba": _version("numba"),
        "llvmlite": _version("llvmlite"),
        "python": sys.version,
        "machine": platform.machine(),
        "cpu": hashlib.sha256(_cpu_identity().encode()).hexdigest()[:16],
        "isa": cachedir.isa_level(),  # the gates' choices are compiled into the kernels
        "numba_settings": _numba_settings(),
    }


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


@cache
def stamp() -> str:
    return hashlib.sha256(_canonical(config())).hexdigest()[:20]


def kernel_sources(kernel: str, module: str | None = None) -> str:
    """The sources digest a record of `kernel` (defined in `module`, by default found
    from its name) must carry."""
    return sources.digest(module or sources.module_of(kernel))


def _folder(digest: str, create: bool = False) -> str | None:
    return cachedir.store_dir("objload", stamp(), digest[:16], create=create)


def _name(kernel: str, key: tuple[Any, ...]) -> str:
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
    return f"{kernel}-{digest}{SUFFIX}"


def record_path(kernel: str, key: tuple[Any, ...], module: str | None = None) -> str | None:
    """Where the record of this kernel and key is (or would be); None: no usable store."""
    folder = _folder(kernel_sources(kernel, module))
    return None if folder is None else os.path.join(folder, _name(kernel, key))


def _secret(create: bool = False) -> bytes | None:
    """The store's 32-byte signing key; made (0600) by the first writer."""
    folder = cachedir.store_dir("objload", create=create)
    if folder is None:
        return None
    path = os.path.join(folder, "secret")
    try:
        with open(path, "rb") as f:
            data = f.read(64)
        return data if len(data) == 32 else None
    except OSError:
        if not create:
            return None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")  # 0600
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(tmp, path)  # never replaces a concurrent writer's secret
        except FileExistsError:
            pass
        os.remove(tmp)
        return _secret()
    except OSError:
        return None


def _mac(secret: bytes, header: dict[str, Any], code: bytes) -> str:
    body = {k: v for k, v in header.items() if k != "mac"}
    return hmac.new(secret, MAGIC + _canonical(body) + code, hashlib.sha256).hexdigest()


def _reject(path: str, why: str) -> None:
    if path not in _bad:
        _bad.add(path)
        log.warning("onnxexec: ignoring kernel record %s (%s); compiling it again", path, why)


def exists(kernel: str, key: tuple[Any, ...], module: str | None = None) -> bool:
    """A good record is on disk for this kernel and key. A bad one is reported (once)
    here too, so that the process that compiled the kernel instead replaces it."""
    return read(kernel, key, module) is not None


def _parse(
    path: str, data: bytes, kernel: str, key: tuple[Any, ...], digest: str, secret: bytes
) -> Record:
    """The record in `data`, or ValueError saying what is wrong with it."""
    if data[:8] != MAGIC:
        raise ValueError("not a kernel record (bad magic)")
    if len(data) < 12:
        raise ValueError("truncated header")
    (size,) = struct.unpack_from("<I", data, 8)
    if size > _MAX_HEADER or 12 + size > len(data):
        raise ValueError("truncated header")
    try:
        header = json.loads(data[12 : 12 + size].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"unreadable header: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("header is not an object")
    for field, kind in _FIELDS.items():
        if field not in header:
            raise ValueError(f"missing field {field!r}")
        if not isinstance(header[field], kind) or isinstance(header[field], bool):
            raise ValueError(f"field {field!r} has the wrong type")
    code = data[12 + size :]
    if header["code_size"] != len(code):
        raise ValueError(f"code is {len(code)} bytes, header says {header['code_size']}")
    if not hmac.compare_digest(header["mac"], _mac(secret, header, code)):
        raise ValueError("signature does not match (changed, or written by another store)")
    if header["kernel"] != kernel or header["key"] != repr(key):
        raise ValueError(f"record of {header['kernel']} {header['key']}, not of this kernel")
    if header["config"] != config():
        raise ValueError("record of another configuration")
    if header["sources"] != digest:
        raise ValueError("record of other kernel sources")
    consts = []
    for c in header["consts"]:
        if not (isinstance(c, dict) and set(c) == {"dtype"} and isinstance(c["dtype"], str)):
            raise ValueError("a constant that is not a dtype")
        dt = np.dtype(c["dtype"])  # a type string: parsing it runs no user code
        if dt.str != c["dtype"]:
            raise ValueError(f"constant {c['dtype']!r} is not a plain dtype")
        consts.append(dt)
    return Record(
        kernel, header["key"], header["name"], header["wrapper"], header["env"],
        tuple(consts), header["unsupported"], code, path,
    )  # fmt: skip


def read(kernel: str, key: tuple[Any, ...], module: str | None = None) -> Record | None:
    """The record for this kernel (of `module`) and key, or None: there is none, the
    store is unusable, or the record is bad (logged once, and rewritten at exit)."""
    digest = kernel_sources(kernel, module)
    folder = _folder(digest)
    if folder is None:
        return None
    path = os.path.join(folder, _name(kernel, key))
    if path in _bad:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    secret = _secret()
    if secret is None:
        _reject(path, "the store has no signing key")
        return None
    try:
        return _parse(path, data, kernel, key, digest, secret)
    except (ValueError, TypeError, struct.error) as e:
        _reject(path, str(e))
        return None


def _encode_consts(consts: list[Any]) -> list[dict[str, str]] | str:
    """The environment's constants as plain data, or why they can't be."""
    out = []
    for c in consts:
        if not isinstance(c, np.dtype) or c.fields is not None or c.hasobject:
            return f"environment constant of type {type(c).__name__}"
        if np.dtype(c.str) != c:
            return f"dtype {c!r} is not described by its type string"
        out.append({"dtype": c.str})
    return out


def _write(
    kernel: str,
    key: tuple[Any, ...],
    fields: dict[str, Any],
    code: bytes,
    module: str | None = None,
) -> None:
    digest = kernel_sources(kernel, module)
    folder = _folder(digest, create=True)
    secret = _secret(create=True)
    if folder is None or secret is None:
        return  # no usable store: later processes compile too
    header: dict[str, Any] = {"kernel": kernel, "key": repr(key), "config": config()}
    header["sources"] = digest
    header.update(fields)
    header["code_size"] = len(code)
    header["mac"] = _mac(secret, header, code)
    blob = _canonical(header)
    path = os.path.join(folder, _name(kernel, key))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")  # 0600
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + struct.pack("<I", len(blob)) + blob + code)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new
        _bad.discard(path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _checked(fields: dict[str, Any], code: bytes) -> tuple[dict[str, Any], bytes]:
    """The record's fields, or ones saying why its object can't be linked here (e.g. a
    prange kernel needs numba's threading layer)."""
    try:
        obj = load_object(code, numba_rt.resolve)
        for sym in (fields["wrapper"], fields["env"]):
            if sym is not None:
                obj.address(sym)
    except ObjectLoadError as e:
        return {**fields, "unsupported": str(e)}, b""
    return fields, code


def save(kernel: str, key: tuple[Any, ...], cres: Any, module: str | None = None) -> None:
    """Record numba's compile result `cres` for this kernel and call key."""
    try:
        code = getattr(cres.library, OBJECT_ATTR, None)
        if code is None:
            return  # no object code kept for this library (see kernels/__init__.py)
        fndesc = cres.fndesc
        fields: dict[str, Any] = {
            "name": fndesc.qualname.split(".")[-1],
            "wrapper": fndesc.llvm_cpython_wrapper_name,
            "env": cres.target_context.get_env_name(fndesc),
            "consts": [],
            "unsupported": None,
        }
        consts = _encode_consts(list(cres.environment.consts))
        if isinstance(consts, str):
            _write(kernel, key, {**fields, "unsupported": consts}, b"", module)
            return
        fields["consts"] = consts
        _write(kernel, key, *_checked(fields, bytes(code)), module)
    except Exception as e:  # recording is an optimisation: never fail over it
        log.debug("objload: not recording %s: %s", kernel, e)


def save_cfunc(kernel: str, cfunc: Any, module: str | None = None) -> None:
    """Record a compiled numba cfunc: its library's object code and C entry's name."""
    try:
        code = getattr(cfunc._library, OBJECT_ATTR, None)
        if code is None:
            return
        fields = {"name": cfunc.__name__, "wrapper": cfunc.native_name, "env": None,
                  "consts": [], "unsupported": None}  # fmt: skip
        _write(kernel, ("cfunc",), *_checked(fields, bytes(code)), module)
    except Exception as e:  # recording is an optimisation: never fail over it
        log.debug("objload: not recording %s: %s", kernel, e)


def _linked(record: Record) -> Any:
    if record.unsupported is not None:
        raise ObjectLoadError(record.unsupported)
    try:
        return load_object(record.code, numba_rt.resolve)
    except ObjectLoadError as e:
        _reject(record.path, str(e))
        raise
    except (ImportError, OSError):
        raise  # numba's helpers are missing here: not the record's fault
    except Exception as e:  # a malformed ELF the loader's parser trips over
        _reject(record.path, f"{type(e).__name__}: {e}")
        raise ObjectLoadError(str(e)) from e


def _address(record: Record, obj: Any, symbol: str) -> int:
    try:
        return int(obj.address(symbol))
    except Exception as e:  # a symbol the object lacks: the record is wrong
        _reject(record.path, f"{type(e).__name__}: {e}")
        raise ObjectLoadError(str(e)) from e


def build_cfunc(record: Record) -> tuple[int, Any]:
    """(C address, object to keep alive) of a recorded cfunc."""
    obj = _linked(record)
    return _address(record, obj, record.wrapper), obj


def build(module: Any, record: Record) -> Any:
    """A callable for a record that has code; raises ObjectLoadError if it can't load."""
    obj = _linked(record)
    if record.env is None:
        _reject(record.path, "a kernel record without an environment symbol")
        raise ObjectLoadError("no environment symbol")
    return numba_rt.make_callable(
        module,
        record.name,
        _address(record, obj, record.wrapper),
        _address(record, obj, record.env),
        list(record.consts),
        obj,
    )
