"""onnxexec.kernels' numba setup: a kernel loaded from numba's cache keeps its linking
IR as bytes (parsed again on demand), and a new compile that calls it still links; a
cached kernel loads (and allocates) without numba's compiler registries, which a later
compile still gets; every patched numba attribute exists in the pinned numba (this
test fails, rather than the patch silently doing nothing, when one is gone); numba
caches in the per-user store, in a folder per kernel-source digest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from onnxexec.kernels import NUMBA_PATCHES, missing_patch_targets

CALLEE = textwrap.dedent(
    """
    import numba
    import numpy as np


    @numba.njit(cache=True)
    def scaled_sum(x, k):
        acc = 0.0
        for v in x:
            acc += v * k
        return acc
    """
)

RUN = textwrap.dedent(
    """
    import sys
    import numba
    import numpy as np
    import onnxexec.kernels
    import callee_mod

    x = np.arange(5.0)
    first = callee_mod.scaled_sum(x, 2.0)
    lib = callee_mod.scaled_sum.overloads[callee_mod.scaled_sum.signatures[0]].library
    lazy = lib._shared_module is None and hasattr(lib, "_onnxexec_bitcode")

    @numba.njit
    def caller(x):  # compiled now: links the cached callee's IR for inlining
        return callee_mod.scaled_sum(x, 3.0) + 1.0

    print(first, caller(x), lazy, callee_mod.scaled_sum.stats.cache_hits[
        callee_mod.scaled_sum.signatures[0]])
    """
)


def _run(tmp: Path) -> list[str]:
    env = dict(os.environ, ONNXEXEC_CACHE_DIR=str(tmp / "cache"))
    env.pop("NUMBA_DISABLE_JIT", None)  # CI's coverage pass sets it; this needs the JIT
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), *sys.path])
    out = subprocess.run(
        [sys.executable, "-c", RUN], capture_output=True, text=True, env=env, check=True, cwd=tmp
    )
    return out.stdout.split()


def test_cached_kernel_ir_is_parsed_on_demand_and_still_links(tmp_path: Path) -> None:
    (tmp_path / "callee_mod.py").write_text(CALLEE)
    compiled = _run(tmp_path)  # compiles and writes the cache
    assert compiled[:2] == ["20.0", "31.0"]
    loaded = _run(tmp_path)  # loads it: IR kept as bitcode until `caller` links it
    assert loaded == ["20.0", "31.0", "True", "1"]


ALLOC = textwrap.dedent(
    """
    import numba
    import numpy as np


    @numba.njit(cache=True)
    def doubled(x):
        out = np.empty_like(x)  # needs numba's runtime (NRT) allocator
        for i in range(x.size):
            out[i] = 2.0 * x[i]
        return out
    """
)

RUN_ALLOC = textwrap.dedent(
    """
    import sys
    import math
    import numba
    import numpy as np
    import onnxexec.kernels
    import alloc_mod

    y = alloc_mod.doubled(np.arange(4.0))
    registries = "numba.np.polynomial.polynomial_core" in sys.modules

    @numba.njit
    def later(x):  # a compile after the load: typing needs the full registries
        return math.erf(x) + np.cos(x)

    print(*y.tolist(), registries, round(later(0.5), 6), alloc_mod.doubled.stats.cache_hits[
        alloc_mod.doubled.signatures[0]])
    """
)


def test_cached_kernel_loads_without_the_compiler_registries(tmp_path: Path) -> None:
    (tmp_path / "alloc_mod.py").write_text(ALLOC)
    env = dict(os.environ, ONNXEXEC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_DISABLE_JIT", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])

    def run() -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", RUN_ALLOC],
            capture_output=True, text=True, env=env, check=True, cwd=tmp_path,
        )  # fmt: skip
        return out.stdout.split()

    expect = str(round(0.5204998778 + 0.8775825619, 6))
    first = run()  # compiles doubled and the runtime (registries loaded by that compile)
    assert first[:4] == ["0.0", "2.0", "4.0", "6.0"] and first[5] == expect
    # loads it from the cache: no registries until `later` compiles
    loaded = run()
    assert loaded == ["0.0", "2.0", "4.0", "6.0", "False", expect, "1"]
    assert not list((tmp_path / "cache").rglob("*.pkl"))  # no pickles of onnxexec's own


@pytest.mark.parametrize("patch", sorted(NUMBA_PATCHES))
def test_patched_numba_attributes_exist(patch: str) -> None:
    """Fails when a numba upgrade removed or renamed what a patch replaces (numba 0.68
    renamed `_UserProvidedCacheLocator`, and the old guard then skipped silently)."""
    assert missing_patch_targets(patch) == []


def test_installed_numba_is_within_the_pinned_range() -> None:
    """pyproject's pins are the versions the patches were tested with."""
    from importlib import metadata

    text = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    for dist in ("numba", "llvmlite"):
        pin = re.search(rf'"{dist}>=([0-9.]+),<([0-9.]+)"', text)
        assert pin is not None, f"{dist} is not pinned to a range in pyproject.toml"
        low, high = (tuple(map(int, v.split("."))) for v in pin.groups())
        have = tuple(map(int, metadata.version(dist).split(".")[:2]))
        assert low[:2] <= have < high[:2], (dist, have, pin.group(0))


def test_patches_are_applied_once_numba_is_imported(tmp_path: Path) -> None:
    code = (
        "import onnxexec.kernels, numba, numba.core.caching, numba.core.codegen as cg, json;"
        "print(json.dumps([cg.CPUCodeLibrary._onnxexec_keeps_object,"
        " cg.CPUCodeLibrary._onnxexec_lazy_ir, numba.core.caching.Cache._onnxexec_no_refresh,"
        " numba.config.CACHE_DIR]))"
    )
    env = dict(os.environ, ONNXEXEC_CACHE_DIR=str(tmp_path / "store"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    keeps, lazy, no_refresh, cache_dir = json.loads(out.stdout)
    assert keeps and lazy and no_refresh
    from onnxexec.kernels import sources_digest

    assert Path(cache_dir).parent == tmp_path / "store" / "numba"
    assert Path(cache_dir).name.startswith(sources_digest()[:16] + "-")
