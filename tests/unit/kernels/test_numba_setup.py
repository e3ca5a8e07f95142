"""onnxexec.kernels' numba setup: a kernel loaded from numba's cache keeps its linking
IR as bytes (parsed again on demand), and a new compile that calls it still links; a
cached kernel loads (and allocates) without numba's compiler registries, which a later
compile still gets, and numba's runtime functions come from their own object cache."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp / "cache"))
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

    from numba.core.runtime import rtsys

    nrt_cached = hasattr(rtsys.library, "_onnxexec_bitcode")  # unserialized object code
    print(*y.tolist(), registries, round(later(0.5), 6), alloc_mod.doubled.stats.cache_hits[
        alloc_mod.doubled.signatures[0]], nrt_cached)
    """
)


def test_cached_kernel_loads_without_the_compiler_registries(tmp_path: Path) -> None:
    (tmp_path / "alloc_mod.py").write_text(ALLOC)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
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
    assert first[-1] == "False" and list((tmp_path / "cache").glob("nrt-*.pkl"))
    # loads both from the caches: no registries until `later` compiles
    loaded = run()
    assert loaded == ["0.0", "2.0", "4.0", "6.0", "False", expect, "1", "True"]


def test_cache_files_are_cleared_when_the_kernel_sources_change(tmp_path: Path) -> None:
    from onnxexec.kernels import _clear_if_changed

    def files() -> set[str]:
        return {p.name for p in tmp_path.iterdir()}

    (tmp_path / "conv2d.f-10.py311.nbi").write_text("index")
    (tmp_path / "conv2d.f-10.py311.1.nbc").write_text("code")
    (tmp_path / "nrt-abc.pkl").write_text("runtime")  # keyed on its own IR: kept
    _clear_if_changed(str(tmp_path), "digest-1")  # no stamp yet: stale, cleared
    assert files() == {"nrt-abc.pkl", "onnxexec-kernels.sha256"}
    (tmp_path / "gemm.g-5.py311.nbi").write_text("index")
    _clear_if_changed(str(tmp_path), "digest-1")  # same sources: kept
    assert "gemm.g-5.py311.nbi" in files()
    _clear_if_changed(str(tmp_path), "digest-2")  # a kernel changed: cleared again
    assert files() == {"nrt-abc.pkl", "onnxexec-kernels.sha256"}
    assert (tmp_path / "onnxexec-kernels.sha256").read_text() == "digest-2"
    _clear_if_changed(str(tmp_path / "missing"), "digest-3")  # no cache folder: no-op
    assert not (tmp_path / "missing").exists()
