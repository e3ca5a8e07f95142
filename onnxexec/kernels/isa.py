"""The instruction set kernels may use: the host's, capped by ONNXEXEC_ISA.

    ONNXEXEC_ISA=generic   no AVX at all: numba's portable loops, SSE only
    ONNXEXEC_ISA=avx2      AVX2 / FMA / F16C kernels, nothing from AVX-512
    ONNXEXEC_ISA=avx512    everything the host has (the default when unset)

The cap only ever removes: `avx512` on an AVX2 host still runs AVX2 code. Every gate
that picks a kernel by CPU feature (dw_asm, direct_job, sgemm_packed, ggml_simd,
ggml_simd_attn, ...) asks `has()` here, never /proc/cpuinfo or LLVM directly, so a
machine without AVX-512 can be imitated on one that has it, and CI runs the kernel
tests that way (.ci/run).

numba compiles for the host CPU, so under a cap its own code generation is capped too
(`cap_numba_codegen`, installed by kernels/__init__.py when numba's codegen module is
imported): LLVM gets the host's feature list with the removed features turned off.
That is needed for honesty (a numba loop would otherwise use zmm registers under
`avx2`) and for caching: numba keys a cached kernel on the codegen's features, while
our gates are module constants frozen into the kernels that read them, so a kernel
cached under one level must never load under another. kernels/objload's record stamp
includes `level()` for the same reason. A NUMBA_CPU_FEATURES set by the user wins
over the cap (numba reads it before asking for the host's features).

Reads the environment once, on first use (the gates are import-time constants).
"""

from __future__ import annotations

import functools
import os
from typing import Final

ENV: Final = "ONNXEXEC_ISA"
LEVELS: Final = ("generic", "avx2", "avx512")  # ascending
# Host flags (/proc/cpuinfo names, which LLVM shares for these) each level needs.
_NEEDS: Final = {
    "avx2": frozenset({"avx", "avx2", "fma", "f16c"}),
    "avx512": frozenset({"avx512f"}),
}
# Features outside the avx* / avx512* prefixes that need, or are only encoded with,
# AVX (VEX / EVEX): LLVM would re-enable AVX for some of them if left on.
_VEX_ONLY: Final = frozenset({"fma", "fma4", "f16c", "xop", "vaes", "vpclmulqdq", "sha512"})
_VEX_ONLY_PREFIXES: Final = ("avx", "amx", "sm3", "sm4")
_EVEX_PREFIXES: Final = ("avx512", "avx10", "evex512", "amx")


def _removed_by(level: str, flag: str) -> bool:
    """Whether the cap `level` takes `flag` (a host feature) away."""
    if level == "avx512":
        return False
    if flag.startswith(_EVEX_PREFIXES):
        return True
    return level == "generic" and (flag in _VEX_ONLY or flag.startswith(_VEX_ONLY_PREFIXES))


@functools.cache
def host_flags() -> frozenset[str]:
    """This CPU's instruction-set flags (avx2, fma, avx512f, ...), as the kernel lists
    them in /proc/cpuinfo: from CPUID, less what the OS doesn't enable, which is what
    LLVM's host detection also checks. Elsewhere, LLVM's own list (loads LLVM)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    import llvmlite.binding as llb

    return frozenset(k for k, v in llb.get_host_cpu_features().items() if v)


def _level_of(flags: frozenset[str]) -> str:
    best = "generic"
    for name in LEVELS[1:]:
        if not _NEEDS[name] <= flags:
            break
        best = name
    return best


def host_level() -> str:
    """The highest level this CPU supports."""
    return _level_of(host_flags())


@functools.cache
def level() -> str:
    """The level kernels run at: the host's, lowered to ONNXEXEC_ISA if that is lower.

    Raises ValueError for a value that is not one of LEVELS."""
    host = host_level()
    want = os.environ.get(ENV, "").strip().lower()
    if not want:
        return host
    if want not in LEVELS:
        raise ValueError(f"{ENV}={want!r}: expected one of {', '.join(LEVELS)} (or unset)")
    return min(want, host, key=LEVELS.index)


@functools.cache
def flags() -> frozenset[str]:
    """The host's flags less those above `level()`."""
    cap = level()
    return frozenset(f for f in host_flags() if not _removed_by(cap, f))


def has(*names: str) -> bool:
    """True when every named flag (/proc/cpuinfo spelling) is usable under the cap."""
    return set(names) <= flags()


def capped_llvm_features(features: dict[str, bool]) -> dict[str, bool]:
    """LLVM's host feature map with everything above `level()` turned off."""
    cap = level()
    return {k: v and not _removed_by(cap, k) for k, v in features.items()}


def cap_numba_codegen(codegen: object) -> None:
    """Make numba.core.codegen's host feature string obey the cap (see module doc).

    Wraps numba's `get_host_cpu_features`, which its CPU codegen calls when
    NUMBA_CPU_FEATURES is unset; nothing to do at the host's own level."""
    real = getattr(codegen, "get_host_cpu_features", None)
    if real is None or getattr(real, "_onnxexec_isa", False) or level() == host_level():
        return

    def get_host_cpu_features() -> str:
        flat = real()  # "+avx2,-avx512f,..." ("" when LLVM can't tell)
        host = {f[1:]: f[0] == "+" for f in flat.split(",") if f[:1] in "+-" and len(f) > 1}
        capped = capped_llvm_features(host)
        return ",".join(("+" if on else "-") + name for name, on in capped.items())

    get_host_cpu_features._onnxexec_isa = True  # type: ignore[attr-defined]
    codegen.get_host_cpu_features = get_host_cpu_features  # type: ignore[attr-defined]
