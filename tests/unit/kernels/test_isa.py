"""kernels/isa.py: ONNXEXEC_ISA caps every CPU-feature gate and numba's own code
generation, never raises the level above the host's, and rejects unknown values; the
kernel caches are keyed by the level. Gate states are import-time constants, so each
level is checked in a fresh interpreter; the expected states come from the host's
/proc/cpuinfo flags, read here independently of isa.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxexec.kernels import isa

REPO = Path(__file__).resolve().parents[3]

_PROBE = """
import json
import numba
import numpy as np
from onnxexec.kernels.conv import direct_job, dw_asm
from onnxexec.kernels.quant import ggml_simd
from onnxexec.kernels.attn import ggml_simd_attn
from onnxexec.kernels import isa
from onnxexec.kernels.linalg import sgemm_packed
from onnxexec.kernels.objload import store


@numba.njit
def saxpy(a, x, y):
    for i in range(x.size):
        y[i] += a * x[i]


saxpy(np.float32(2), np.ones(4096, np.float32), np.ones(4096, np.float32))
asm = "".join(saxpy.inspect_asm().values())
lib = next(iter(saxpy.overloads.values())).library
print(json.dumps({
    "level": isa.level(),
    "dw_asm": dw_asm.AVAILABLE, "direct": direct_job.AVAILABLE,
    "packed": sgemm_packed.AVAILABLE, "packed512": sgemm_packed.AVX512,
    "simd": ggml_simd.AVAILABLE, "simd_attn": ggml_simd_attn.AVAILABLE,
    "features": lib.codegen._tm_features, "zmm": "zmm" in asm, "ymm": "ymm" in asm,
    "stamp": store.stamp(),
}))
"""


def _host_flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    pytest.skip("no /proc/cpuinfo flags on this platform")


def _probe(level: str) -> dict:
    env = {**os.environ, "ONNXEXEC_ISA": level, "PYTHONPATH": str(REPO)}
    env = {k: v for k, v in env.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def probes() -> dict[str, dict]:
    return {level: _probe(level) for level in ("", "avx2", "generic")}


def test_gates_follow_the_cap(probes):
    host = _host_flags()
    avx2 = {"avx", "avx2", "fma", "f16c"} <= host
    avx512 = avx2 and "avx512f" in host
    unset, capped, generic = probes[""], probes["avx2"], probes["generic"]
    assert unset["level"] == ("avx512" if avx512 else "avx2" if avx2 else "generic")
    assert unset["dw_asm"] == unset["direct"] == unset["packed512"] == avx512
    assert unset["simd"] == unset["simd_attn"] == avx2
    assert capped["level"] == ("avx2" if avx2 else "generic")
    assert not (capped["dw_asm"] or capped["direct"] or capped["packed512"])
    assert capped["packed"] == capped["simd"] == capped["simd_attn"] == avx2
    assert generic["level"] == "generic"
    assert not any(generic[k] for k in ("dw_asm", "direct", "packed", "simd", "simd_attn"))


def test_numba_codegen_obeys_the_cap(probes):
    """LLVM gets no AVX-512 feature under avx2 and no AVX at all under generic, so the
    vectorized loop uses no zmm (resp. no ymm) register."""
    capped, generic = probes["avx2"], probes["generic"]
    assert "+avx512" not in capped["features"] and not capped["zmm"]
    assert "+avx" not in generic["features"] and "+fma" not in generic["features"]
    assert not generic["zmm"] and not generic["ymm"]
    if "avx512f" in _host_flags():
        assert "+avx512f" in probes[""]["features"]


def test_each_level_has_its_own_kernel_records(probes):
    """objload's records (and numba's cache, keyed by the codegen's features) never
    serve one level's kernels to another: the gates' choices are compiled in."""
    assert len({p["stamp"] for p in probes.values()}) == len(probes)


def test_unknown_value_is_refused(monkeypatch):
    monkeypatch.setenv(isa.ENV, "avx1024")
    isa.level.cache_clear()
    try:
        with pytest.raises(ValueError, match="ONNXEXEC_ISA='avx1024': expected one of generic"):
            isa.level()
    finally:
        monkeypatch.delenv(isa.ENV)
        isa.level.cache_clear()


@pytest.mark.parametrize(
    "host,want,level",
    [
        ({"sse2", "avx", "avx2", "fma", "f16c"}, "avx512", "avx2"),  # never above the host
        ({"sse2", "avx", "avx2", "fma", "f16c"}, "", "avx2"),
        ({"sse2", "avx", "avx2"}, "", "generic"),  # AVX2 without FMA: not the avx2 level
        ({"sse2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw"}, "AVX2 ", "avx2"),
    ],
)
def test_level_is_the_lower_of_host_and_cap(monkeypatch, host, want, level):
    monkeypatch.setattr(isa, "host_flags", lambda: frozenset(host))
    monkeypatch.setenv(isa.ENV, want)
    for f in (isa.level, isa.flags):
        f.cache_clear()
    try:
        assert isa.level() == level
        assert not any(f.startswith("avx512") for f in isa.flags()) or level == "avx512"
    finally:
        monkeypatch.undo()
        for f in (isa.level, isa.flags):
            f.cache_clear()


def test_capped_llvm_features(monkeypatch):
    """What the cap turns off in LLVM's feature map: AVX-512 (and what implies it)
    under avx2; every VEX / EVEX feature under generic."""
    feats = {"sse4.2": True, "avx": True, "avx2": True, "fma": True, "f16c": True,
             "avx512f": True, "avx512bf16": True, "evex512": True, "vaes": True}  # fmt: skip
    for want, on in [
        ("avx2", {"sse4.2", "avx", "avx2", "fma", "f16c", "vaes"}),
        ("generic", {"sse4.2"}),
    ]:
        monkeypatch.setattr(isa, "level", lambda want=want: want)
        assert {k for k, v in isa.capped_llvm_features(feats).items() if v} == on
