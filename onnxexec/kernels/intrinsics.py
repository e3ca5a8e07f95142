"""LLVM intrinsics the kernels and the native thread pool share: raw pointers from
int64 addresses (for numba.carray), atomics on int64 arrays, the cycle counter, futex
wait / wake through libc's syscall(), and calling a span kernel by its C address.

Pure llvmlite IR builders behind kernels/objload's `intrinsic`: importing this module
loads neither numba nor LLVM. It sits below every kernel subpackage and native/ (it
imports only kernels.objload), so the pool (native/parallel.py) and the span kernels
it runs can both use it without importing each other.
"""

from __future__ import annotations

import ctypes
import os

from llvmlite import ir  # IR builders only (pure Python): LLVM itself is not loaded

from onnxexec.kernels import objload as nb
from onnxexec.kernels.objload import intrinsic, lazy_module

# used inside intrinsic definitions, which run only while numba compiles a kernel
types = lazy_module("numba.core.types")
cgutils = lazy_module("numba.core.cgutils")

_I64 = ir.IntType(64)


@intrinsic
def f32_ptr(typingctx, addr):
    """An int64 address as a float32 pointer (for numba.carray)."""
    sig = types.CPointer(types.float32)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.FloatType().as_pointer())

    return sig, codegen


@intrinsic
def i64_ptr(typingctx, addr):
    """An int64 address as an int64 pointer (for numba.carray)."""
    sig = types.CPointer(types.int64)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], _I64.as_pointer())

    return sig, codegen


@intrinsic
def call_span(typingctx, fn, a, fa, s0, s1):
    """Call the C function at address fn as void fn(int64 *a, double *fa, int64 s0,
    int64 s1): a native job's span kernel (kernels/span_fns.py), a, fa addresses."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(
            ir.VoidType(), [i64.as_pointer(), ir.DoubleType().as_pointer(), i64, i64]
        )
        callee = builder.inttoptr(args[0], fnty.as_pointer())
        ap = builder.inttoptr(args[1], i64.as_pointer())
        fp = builder.inttoptr(args[2], ir.DoubleType().as_pointer())
        builder.call(callee, [ap, fp, args[3], args[4]])
        return context.get_dummy_value()

    return sig, codegen


def _slot(context, builder, aryty, ary, idx):
    a = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, a, [idx])


@intrinsic
def atomic_load(typingctx, arr, idx):
    """arr[idx] of an int64 array, read atomically (never hoisted out of a loop)."""
    sig = types.int64(arr, types.intp)

    def codegen(context, builder, signature, args):
        p = _slot(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(p, "seq_cst", 8)

    return sig, codegen


@intrinsic
def atomic_store(typingctx, arr, idx, value):
    """arr[idx] = value, atomically, ordered after every earlier store."""
    sig = types.void(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        p = _slot(context, builder, signature.args[0], args[0], args[1])
        builder.store_atomic(args[2], p, "seq_cst", 8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def atomic_add(typingctx, arr, idx, value):
    """arr[idx] += value atomically; returns the old value."""
    sig = types.int64(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        p = _slot(context, builder, signature.args[0], args[0], args[1])
        return builder.atomic_rmw("add", p, args[2], "seq_cst")

    return sig, codegen


@intrinsic
def cycles(typingctx):
    """The CPU time-stamp counter (llvm.readcyclecounter): fixed rate, cheap to read."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I64, [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return sig, codegen


def _find_syscall() -> int:
    """libc's syscall() on x86-64 Linux (for futex waits), else 0."""
    if os.uname().sysname != "Linux" or os.uname().machine != "x86_64":
        return 0
    try:
        return int(ctypes.cast(ctypes.CDLL(None).syscall, ctypes.c_void_p).value or 0)
    except (OSError, AttributeError):
        return 0


SYSCALL: int = _find_syscall()
_SYS_FUTEX, _FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 202, 128, 129


@intrinsic
def _futex(typingctx, fn, arr, idx, op, val, timeout):
    """syscall(SYS_futex, &arr[idx] (low 32 bits), op, val, timeout*) through `fn`."""
    sig = types.int64(types.int64, arr, types.intp, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        fn, ary, idx, op, val, timeout = args
        p = _slot(context, builder, signature.args[1], ary, idx)
        fnty = ir.FunctionType(_I64, [_I64, _I64, _I64, _I64, _I64])
        callee = builder.inttoptr(fn, fnty.as_pointer())
        return builder.call(
            callee,
            [
                ir.Constant(_I64, _SYS_FUTEX),
                builder.ptrtoint(p, _I64),
                op,
                builder.and_(val, ir.Constant(_I64, 0xFFFFFFFF)),
                timeout,
            ],
        )

    return sig, codegen


@nb.njit(nogil=True, cache=True)
def futex_wait(fn, arr, idx, value, timeout):
    """Sleep while arr[idx] == value (at most `timeout`, a (sec, nsec) int64 array)."""
    _futex(fn, arr, idx, _FUTEX_WAIT_PRIVATE, value, timeout.ctypes.data)


@nb.njit(nogil=True, cache=True)
def futex_wake(fn, arr, idx):
    """Wake every thread sleeping in futex_wait on arr[idx]."""
    _futex(fn, arr, idx, _FUTEX_WAKE_PRIVATE, 0x7FFFFFFF, 0)


@intrinsic
def atomic_cas(typingctx, arr, idx, expected, value):
    """arr[idx] = value if it equals `expected` (atomically); whether it did."""
    sig = types.boolean(arr, types.intp, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        p = _slot(context, builder, signature.args[0], args[0], args[1])
        pair = builder.cmpxchg(p, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return sig, codegen
