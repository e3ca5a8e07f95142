"""`onnxexec cache info|clear` on a store built here: the path, permissions, entries per
configuration, sources digest and kind; `clear --stale` keeps the current configuration
and sources, `clear` removes only the store's own folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from onnxexec.cli.main import cli
from onnxexec.kernels import cachedir, sources_digest
from onnxexec.kernels.objload import store

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64",
    reason="records hold x86-64 ELF objects",
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(tmp_path / "store"))
    monkeypatch.setattr(store, "_bad", set())
    from tests.unit.kernels.test_kernel_store import FIELDS, _object

    store._write("pkg.f", ("<i8",), FIELDS, _object(1))
    store._write("pkg.g", ("<f8",), FIELDS, _object(2))
    store._write("pkg.c", ("cfunc",), {**FIELDS, "env": None}, _object(3))
    store._write("pkg.p", ("<i4",), {**FIELDS, "unsupported": "calls numba's threading"}, b"")
    now = sources_digest()[:16]  # pkg has no file: its kernels' digest is every source's
    other = tmp_path / "store" / "objload" / ("0" * 20) / now
    other.mkdir(parents=True)
    (other / "pkg.f-0.oxk").write_bytes(b"x" * 100)
    edited = tmp_path / "store" / "objload" / store.stamp() / ("f" * 16)  # older sources
    edited.mkdir()
    (edited / "pkg.f-0.oxk").write_bytes(b"y" * 50)
    numba_now = Path(cachedir.numba_cache_dir(sources_digest()))
    numba_now.mkdir(parents=True)
    (numba_now / "k.py311.nbi").write_bytes(b"i" * 10)
    (numba_now / "k.py311.1.nbc").write_bytes(b"c" * 20)
    (tmp_path / "store" / "numba" / "old-avx2").mkdir()
    (tmp_path / "store" / "mine.txt").write_text("not the store's")
    return tmp_path / "store"


def test_info_lists_entries_per_configuration(home: Path) -> None:
    out = CliRunner().invoke(cli, ["cache", "info"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == f"path: {home}"
    assert lines[1] == "permissions: 0700 (user-only, in use)"
    now = sources_digest()[:16]
    current = next(ln for ln in lines if f"objload/{store.stamp()}/{now} (current)" in ln)
    assert "4 files" in current
    assert "1 cfunc, 2 kernel, 1 numba-only" in current
    other = f"objload/{'0' * 20}/{now} (other configuration): 1 file,"
    assert any(other in ln for ln in lines)
    edited = f"objload/{store.stamp()}/{'f' * 16} (older sources): 1 file, 50 B"
    assert any(edited in ln for ln in lines)
    assert any("(current): 2 files, 30 B; 1 nbc, 1 nbi" in ln for ln in lines)


def test_info_says_when_the_store_is_refused(home: Path) -> None:
    os.chmod(home, 0o777)
    try:
        out = CliRunner().invoke(cli, ["cache", "info"])
    finally:
        os.chmod(home, 0o700)
    assert "permissions: 0777 (NOT USED" in out.output


def test_clear_stale_then_all(home: Path) -> None:
    out = CliRunner().invoke(cli, ["cache", "clear", "--stale"])
    assert out.exit_code == 0 and out.output.startswith("removed 3 folders")
    assert not (home / "objload" / ("0" * 20)).exists()
    assert not (home / "objload" / store.stamp() / ("f" * 16)).exists()
    assert not (home / "numba" / "old-avx2").exists()
    assert store.read("pkg.f", ("<i8",)) is not None
    out = CliRunner().invoke(cli, ["cache", "clear"])
    assert out.exit_code == 0 and out.output.startswith("removed 2 folders")
    assert store.read("pkg.f", ("<i8",)) is None
    assert (home / "mine.txt").read_text() == "not the store's"


def test_info_on_a_missing_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONNXEXEC_CACHE_DIR", str(tmp_path / "none"))
    out = CliRunner().invoke(cli, ["cache", "info"])
    assert out.exit_code == 0
    assert "state: missing" in out.output and not (tmp_path / "none").exists()
