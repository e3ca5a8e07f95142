"""The per-user kernel store (kernels/cachedir.py) and objload's plain-data records
(kernels/objload/store.py): every tampered, foreign, truncated or malformed record is
refused with one warning and never run; a store others can write is not used; a write
never deletes another configuration's records.

In-process cases write a record of a real LLVM object (linked by the same loader the
kernels use) and damage it as the issue's hostile user did; the subprocess case shows a
damaged record being recompiled, giving the numpy reference's numbers, and replaced.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import stat
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from onnxexec.kernels import cachedir
from onnxexec.kernels.objload import store
from onnxexec.kernels.objload.elf import ObjectLoadError

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64",
    reason="records hold x86-64 ELF objects",
)
KEY = (("<f4", 1, "C", True, True), "<i8")
OTHER = (("<f8", 1, "C", True, True), "<i8")


def _object(value: int) -> bytes:
    """ELF object of `long answer(void) { return value; }`, named wrapper and env."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    i64 = ir.IntType(64)
    mod = ir.Module("t")
    mod.triple = llvm.get_process_triple()
    env = ir.GlobalVariable(mod, i64, "env")
    env.initializer = ir.Constant(i64, 0)
    fn = ir.Function(mod, ir.FunctionType(i64, []), "wrapper")
    ir.IRBuilder(fn.append_basic_block()).ret(ir.Constant(i64, value))
    tm = llvm.Target.from_default_triple().create_target_machine(codemodel="large")
    return tm.emit_object(llvm.parse_assembly(str(mod)))


FIELDS = {"name": "f", "wrapper": "wrapper", "env": "env", "consts": [{"dtype": "<f4"}],
          "unsupported": None}  # fmt: skip


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(tmp_path / "store"))
    monkeypatch.setattr(store, "_bad", set())
    monkeypatch.setattr(cachedir, "_warned", set())
    return tmp_path / "store"


def _answer(record: store.Record) -> int:
    import ctypes

    address, _keep = store.build_cfunc(record)
    return int(ctypes.CFUNCTYPE(ctypes.c_int64)(address)())


def _path(kernel: str, key: tuple) -> Path:
    path = store.record_path(kernel, key)
    assert path is not None
    return Path(path)


def _split(data: bytes) -> tuple[dict, bytes]:
    (size,) = struct.unpack_from("<I", data, 8)
    return json.loads(data[12 : 12 + size]), data[12 + size :]


def _join(header: dict, code: bytes) -> bytes:
    blob = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return store.MAGIC + struct.pack("<I", len(blob)) + blob + code


def test_record_round_trip_with_user_only_permissions(home: Path) -> None:
    store._write("pkg.f", KEY, FIELDS, _object(42))
    record = store.read("pkg.f", KEY)
    assert record is not None and _answer(record) == 42
    assert record.consts == (np.dtype(np.float32),)
    for folder in (home, home / "objload", home / "objload" / store.stamp()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for file in (home / "objload").rglob("*"):
        if file.is_file():
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert store.read("pkg.f", OTHER) is None  # no record for another call key


def _resign(header: dict, code: bytes, secret: bytes) -> bytes:
    header = {k: v for k, v in header.items() if k != "mac"}
    header["mac"] = store._mac(secret, header, code)
    return _join(header, code)


def _evil_pickle(marker: Path) -> bytes:
    class Evil:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    return pickle.dumps(Evil())


# each: (how the hostile user / the disk damaged f's record) -> what the warning names
TAMPER = {
    "truncated": (lambda d, g, s, m: d[: len(d) // 2], "truncated|code is"),
    "header cut": (lambda d, g, s, m: d[:10], "truncated"),
    "other kernel's record copied over": (lambda d, g, s, m: g, "not of this kernel"),
    "code replaced, plain checksum recomputed": (
        lambda d, g, s, m: _resign(_split(d)[0], _split(g)[1], hashlib.sha256(b"").digest()),
        "signature",
    ),
    "code replaced, header kept": (
        lambda d, g, s, m: d[: len(d) - len(_split(d)[1])] + _split(g)[1],
        "signature|code is",
    ),
    "bad ELF header, validly signed": (
        lambda d, g, s, m: _resign(_split(d)[0], b"\x7fELG" + _split(d)[1][4:], s),
        "not an ELF",
    ),
    "missing field, validly signed": (
        lambda d, g, s, m: _resign(
            {k: v for k, v in _split(d)[0].items() if k != "wrapper"}, _split(d)[1], s
        ),
        "missing field 'wrapper'",
    ),
    "constant that is not a dtype": (
        lambda d, g, s, m: _resign(
            {**_split(d)[0], "consts": [{"dtype": "O"}, {"pickle": "x"}]}, _split(d)[1], s
        ),
        "constant",
    ),
    "pickle with __reduce__": (lambda d, g, s, m: _evil_pickle(m), "bad magic"),
    "json garbage": (lambda d, g, s, m: store.MAGIC + b"\xff\xff\x00\x00{", "truncated"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_tampered_record_is_refused_once_and_rewritten(
    case: str, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tamper, reason = TAMPER[case]
    store._write("pkg.f", KEY, FIELDS, _object(42))
    store._write("pkg.g", KEY, FIELDS, _object(666))  # same call key, another kernel
    path = _path("pkg.f", KEY)
    good, other = path.read_bytes(), _path("pkg.g", KEY).read_bytes()
    secret = (home / "objload" / "secret").read_bytes()
    marker = home.parent / "pwned"
    path.write_bytes(tamper(good, other, secret, marker))

    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # asked again and again: one warning
            record = store.read("pkg.f", KEY)
            if record is not None:  # only a damage the MAC can't see gets this far
                with pytest.raises(ObjectLoadError):
                    _answer(record)
    warnings = [r.getMessage() for r in caplog.records if "ignoring kernel record" in r.message]
    assert len(warnings) == 1, warnings
    import re

    assert re.search(reason, warnings[0]), warnings[0]
    assert not marker.exists()  # nothing in the file ran
    assert not store.exists("pkg.f", KEY)  # so the process that compiles it records it
    store._write("pkg.f", KEY, FIELDS, _object(42))
    record = store.read("pkg.f", KEY)
    assert record is not None and _answer(record) == 42
    assert store.read("pkg.g", KEY) is not None and _answer(store.read("pkg.g", KEY)) == 666


def test_record_from_another_store_is_foreign(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store._write("pkg.f", KEY, FIELDS, _object(7))
    theirs = _path("pkg.f", KEY).read_bytes()
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(home.parent / "mine"))
    store._write("pkg.h", KEY, FIELDS, _object(1))  # this store has its own secret
    _path("pkg.f", KEY).write_bytes(theirs)
    with caplog.at_level(logging.WARNING):
        assert store.read("pkg.f", KEY) is None
    assert "signature" in caplog.text


def test_another_configuration_is_neither_read_nor_deleted(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store._write("pkg.f", KEY, FIELDS, _object(42))
    ours = home / "objload" / store.stamp()
    # e.g. written under NUMBA_OPT=0
    theirs = home / "objload" / "0123456789abcdef0123" / _path("pkg.f", KEY).parent.name
    theirs.mkdir(mode=0o700, parents=True)
    (theirs / _path("pkg.f", KEY).name).write_bytes(_path("pkg.f", KEY).read_bytes())
    store._write("pkg.g", KEY, FIELDS, _object(1))
    assert (theirs / _path("pkg.f", KEY).name).exists() and ours.exists()
    # a record of this kernel and key made under another configuration is refused
    header, code = _split(_path("pkg.f", KEY).read_bytes())
    header["config"] = {**header["config"], "numba_settings": "[('NUMBA_OPT', '0')]"}
    secret = (home / "objload" / "secret").read_bytes()
    _path("pkg.f", KEY).write_bytes(_resign(header, code, secret))
    assert store.read("pkg.f", KEY) is None


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o757])
def test_store_writable_by_others_is_refused_with_one_warning(
    mode: int, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store._write("pkg.f", KEY, FIELDS, _object(42))
    os.chmod(home, mode)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert store.read("pkg.f", KEY) is None
            store._write("pkg.g", KEY, FIELDS, _object(1))
    assert caplog.text.count("not using the kernel store") == 1
    assert not _path_exists(home, "pkg.g")
    os.chmod(home, 0o700)


def _path_exists(home: Path, kernel: str) -> bool:
    return any(p.name.startswith(kernel + "-") for p in home.rglob("*.oxk"))


def test_read_only_or_missing_store_just_compiles(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.read("pkg.f", KEY) is None and not store.exists("pkg.f", KEY)
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(blocker / "store"))  # can't be created
    store._write("pkg.f", KEY, FIELDS, _object(42))  # no error: nothing recorded
    assert store.read("pkg.f", KEY) is None


def test_store_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ONNXEXEC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cachedir.root() == str(tmp_path / "xdg" / "onnxexec")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # XDG spec: absolute only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cachedir.root() == str(tmp_path / "home" / ".cache" / "onnxexec")
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(tmp_path / "mine"))
    assert cachedir.root() == str(tmp_path / "mine")


PROBE = textwrap.dedent(
    """
    import numpy as np

    from onnxexec.kernels import objload as nb


    @nb.njit(cache=True)
    def doubled(x):
        return x * 2


    @nb.njit(cache=True)
    def tripled(x):
        return x * 3
    """
)
PROBE_RUN = (
    "import json, sys, probe_mod as k; "
    "print(json.dumps([k.doubled(21), k.tripled(21), 'numba' in sys.modules]))"
)


def test_damaged_records_are_recompiled_and_replaced(tmp_path: Path) -> None:
    """End to end, with numba: a record copied over another kernel's, a pickle whose
    __reduce__ runs a command, and no kernels/__pycache__ stamp to race on
    (PYTHONDONTWRITEBYTECODE=1): right numbers, the command never runs, and the next
    process runs the rewritten records without numba."""
    (tmp_path / "probe_mod.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env.update(ONNXEXEC_CACHE_DIR=str(tmp_path / "store"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))  # fmt: skip

    def run() -> tuple[list, str]:
        out = subprocess.run([sys.executable, "-c", PROBE_RUN], capture_output=True,
                             text=True, env=env, cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout), out.stderr

    assert run()[0] == [42, 63, True]  # compiles, records at exit
    numba_files = sorted((tmp_path / "store" / "numba").rglob("*.nb*"))
    assert numba_files
    assert run()[0] == [42, 63, False]  # the stamp-less process's work was kept
    assert sorted((tmp_path / "store" / "numba").rglob("*.nb*")) == numba_files
    records = {p.name.split("-")[0]: p for p in (tmp_path / "store").rglob("*.oxk")}
    doubled, tripled = records["probe_mod.doubled"], records["probe_mod.tripled"]
    marker = tmp_path / "pwned"
    doubled.write_bytes(tripled.read_bytes())
    tripled.write_bytes(_evil_pickle(marker))
    res, err = run()
    assert res == [42, 63, True] and not marker.exists()
    assert err.count("ignoring kernel record") == 2, err
    assert run()[0] == [42, 63, False]  # replaced at exit by good records
