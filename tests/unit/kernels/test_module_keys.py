"""Stored kernels are keyed per module (objload/sources.py, objload/numba_cache.py): an
edit of a kernel module invalidates the records and numba cache of that module and of
every module that imports it, transitively, and nothing else.

The end-to-end case runs on a copy of the onnxexec package with three probe kernel
modules added: a helper, a user that calls it (numba inlines the helper's code into
the user's object code) and an unrelated one. The expected numbers come from the
probes' arithmetic written out here, not from a previous run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import onnxexec
from onnxexec.kernels.objload import sources

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64",
    reason="records hold x86-64 ELF objects",
)

HELPER = """
from onnxexec.kernels import objload as nb


@nb.njit(cache=True)
def helper(x):
    return x * {factor}
"""
USER = """
from onnxexec.kernels import objload as nb
from onnxexec.kernels.math.probe_helper import helper


@nb.njit(cache=True)
def user(x):
    return helper(x) + 1
"""
OTHER = """
from onnxexec.kernels import objload as nb


@nb.njit(cache=True)
def other(x):
    return x - 5
"""
# `other` first: with its record it runs before numba comes in, linked from the store
RUN = textwrap.dedent(
    """
    import json, sys
    from onnxexec.runtime import kernel_store
    names = []
    kernel_store.subscribe(names.append)
    from onnxexec.kernels.math import probe_other, probe_user
    from onnxexec.kernels.objload import sources
    a = probe_other.other(47)
    b = probe_user.user(10)
    print(json.dumps({"values": [a, b], "numba": "numba" in sys.modules,
                      "compiled": sorted(set(n.rsplit(".", 1)[-1] for n in names)),
                      "digests": {m: sources.digest("onnxexec.kernels.math." + m)
                                  for m in ("probe_helper", "probe_user", "probe_other")}}))
    """
)


def test_a_helper_edit_invalidates_its_users_only(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "onnxexec"
    shutil.copytree(
        os.path.dirname(onnxexec.__file__), pkg, ignore=shutil.ignore_patterns("__pycache__")
    )
    math_dir = pkg / "kernels" / "math"
    (math_dir / "probe_helper.py").write_text(HELPER.format(factor=2))
    (math_dir / "probe_user.py").write_text(USER)
    (math_dir / "probe_other.py").write_text(OTHER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(ONNXEXEC_CACHE_DIR=str(tmp_path / "store"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path / "src"), *sys.path]))  # fmt: skip

    def run() -> dict:
        out = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=600)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.splitlines()[-1])

    first = run()  # an empty store: compiles, records at exit
    assert first["values"] == [42, 21] and first["numba"]
    assert {"other", "user"} <= set(first["compiled"])
    second = run()
    assert second["values"] == [42, 21] and not second["numba"] and not second["compiled"]
    records = {p: p.read_bytes() for p in (tmp_path / "store").rglob("*.probe_other.other-*.oxk")}
    assert len(records) == 1

    (math_dir / "probe_helper.py").write_text(HELPER.format(factor=3))
    third = run()
    assert third["values"] == [42, 31]  # the user runs the helper's new code
    d2, d3 = second["digests"], third["digests"]
    assert d3["probe_helper"] != d2["probe_helper"] and d3["probe_user"] != d2["probe_user"]
    assert d3["probe_other"] == d2["probe_other"]
    assert "user" in third["compiled"] and "other" not in third["compiled"]
    # the unrelated kernel's record was neither rewritten nor moved
    assert {
        p: p.read_bytes() for p in (tmp_path / "store").rglob("*.probe_other.other-*.oxk")
    } == records
    # the user's old record stays for its old sources (a write never deletes), beside the new
    user_records = list((tmp_path / "store").rglob("*.probe_user.user-*.oxk"))
    assert len({p.parent.name for p in user_records}) == 2
    # numba's cache: one folder per module digest, the user's under its new digest
    numba = tmp_path / "store" / "numba"
    assert any(p.name.startswith(d3["probe_user"][:16]) for p in numba.iterdir())
    assert any(p.name.startswith(d2["probe_other"][:16]) for p in numba.iterdir())
    fourth = run()
    assert fourth["values"] == [42, 31] and not fourth["numba"]


def test_closure_follows_imports_transitively() -> None:
    """On the real tree: a module's closure holds what it imports (absolute, relative,
    `from pkg import module`), their imports, and the packages they sit in; not the
    loader (objload) and not unrelated kernel modules."""
    files = sources.module_files()
    kernels = Path(files["onnxexec.kernels"]).parent

    def rel(name: str) -> list[str]:
        return [Path(p).relative_to(kernels).as_posix() for p in sources.closure(name)]

    q4 = (kernels / "quant" / "q4.py").read_text()
    assert "qtypes" in q4  # the fact the next line relies on, read from the file
    assert "quant/qtypes.py" in rel("onnxexec.kernels.quant.q4")
    closure = rel("onnxexec.kernels.quant.q4")
    assert {"__init__.py", "quant/__init__.py", "quant/q4.py"} <= set(closure)
    assert not any(p.startswith(("objload/", "ml/")) for p in closure)
    assert "cachedir.py" not in closure  # where the store is changes no kernel code


def test_relative_imports_resolve(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("from . import a\nfrom .. import b\nfrom ..c import d\nimport e.f\n")
    names = sources.imported_names(str(mod), "p.q.m", False)
    assert {"p.q", "p.q.a", "p", "p.b", "p.c", "p.c.d", "e.f"} <= names


def test_numba_direct_modules_cache_per_module(tmp_path: Path) -> None:
    """A kernel module that decorates with numba itself (quant/q4.py) gets its own
    cache folder too: numba reads CACHE_DIR when a cache=True function is decorated,
    and numba_cache.repoint makes its caches again under the module's folder."""
    code = textwrap.dedent(
        """
        import json
        import onnxexec.kernels.quant.q4 as m
        from numba.core.dispatcher import Dispatcher
        from onnxexec.kernels.objload import sources
        own = [v for v in vars(m).values()
               if isinstance(v, Dispatcher) and v.py_func.__module__ == m.__name__]
        print(json.dumps({"digest": sources.digest(m.__name__),
                          "paths": [d._cache._cache_path for d in own]}))
        """
    )
    env = {**os.environ, "ONNXEXEC_CACHE_DIR": str(tmp_path / "store")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.splitlines()[-1])
    folder = tmp_path / "store" / "numba"
    assert got["paths"]
    for path in got["paths"]:
        assert Path(path).relative_to(folder).parts[0].startswith(got["digest"][:16])
