#!/usr/bin/env bash
# Run the kernel tests under memory checkers (issue 20). From the repository root:
#
#   tools/memcheck.sh                 # both steps below
#   tools/memcheck.sh glibc [TESTS]   # step 1 only (TESTS default: tests/unit/kernels)
#   tools/memcheck.sh valgrind [TESTS]  # step 2 only (TESTS default: the guard-page /
#                                       # boundary tests, a few minutes)
#
# 1. glibc: MALLOC_PERTURB_ fills every new and freed heap block with a byte pattern,
#    so a kernel that reads memory it never wrote (or already freed) gets garbage and
#    its test's numpy oracle fails; MALLOC_CHECK_=3 (with libc_malloc_debug preloaded,
#    which glibc >= 2.34 needs) aborts on heap corruption or a bad free where glibc
#    honours it. At the host's ISA level and at ONNXEXEC_ISA=avx2.
# 2. valgrind memcheck on the portable path: valgrind does not decode AVX-512, so
#    ONNXEXEC_ISA=generic with numba's codegen pinned to a generic x86-64 CPU (the same
#    inside and outside valgrind, whose CPUID differs from the host's), the kernels
#    compiled by a first run outside valgrind into a private cache, then loaded from
#    that cache under valgrind: the numba kernels' own loads and stores are checked,
#    not LLVM's compiler. Python's allocator goes to malloc (PYTHONMALLOC) so
#    valgrind sees every block. tools/valgrind-python.supp silences CPython's own
#    start-up false positives (uninitialised-value kinds inside libpython only).
#    Exit status 99 means valgrind reported errors.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
what=${1:-all}
shift || true

glibc() {
    local tests=("${@:-tests/unit/kernels}")
    local debug
    debug=$("$PY" -c 'import ctypes.util; print(ctypes.util.find_library("c_malloc_debug") or "")')
    local status=0
    for isa in "" avx2; do  # both levels even when the first fails
        echo "== glibc malloc checks, ONNXEXEC_ISA=${isa:-host}: ${tests[*]}"
        ONNXEXEC_ISA=$isa LD_PRELOAD="$debug${LD_PRELOAD:+ $LD_PRELOAD}" MALLOC_CHECK_=3 \
            MALLOC_PERTURB_=165 "$PY" -m pytest -q -p no:cacheprovider "${tests[@]}" || status=1
    done
    return $status
}

valgrind_portable() {
    local tests=("${@:-tests/unit/kernels/test_bounds.py}")
    command -v valgrind >/dev/null || { echo "valgrind not installed: step skipped"; return 0; }
    local cache=${MEMCHECK_CACHE:-${TMPDIR:-/tmp}/onnxexec-memcheck-cache}
    export ONNXEXEC_ISA=generic NUMBA_CPU_NAME=generic NUMBA_CACHE_DIR=$cache
    echo "== compiling the portable kernels into $cache"
    "$PY" -m pytest -q -p no:cacheprovider -k "not bad_arguments" "${tests[@]}"
    echo "== valgrind memcheck, ONNXEXEC_ISA=generic: ${tests[*]}"
    PYTHONMALLOC=malloc valgrind --tool=memcheck --error-exitcode=99 --leak-check=no \
        --track-origins=no --num-callers=30 --quiet \
        --suppressions=tools/valgrind-python.supp \
        "$PY" -m pytest -q -p no:cacheprovider -k "not bad_arguments" "${tests[@]}"
}

case $what in
    glibc) glibc "$@" ;;
    valgrind) valgrind_portable "$@" ;;
    all) glibc "$@" && valgrind_portable ;;
    *) echo "usage: $0 [all|glibc|valgrind] [TESTS...]" >&2; exit 2 ;;
esac
