"""The native thread pool and its contention logic: runtime code the kernels call.

Entry points: `parallel.parallel_for(fn, n)` (Python callables that release the GIL),
`parallel.native_pool().run_native(kind, ...)` (numba span kernels the workers call
without the GIL; each kind's kernel is in kernels/span_fns.py), `parallel.num_threads` /
`set_num_threads`; `launch.run_job` / `launch.recording` / `launch.Replay` (record a
node's native jobs once, replay them); `affinity` (CPU pinning), `schedstat.CoreWaits`
(run-queue waits, how contended the machine is).

May import numpy, the stdlib and the kernels' bottom layer: kernels.objload (numba
without importing numba), kernels.isa, kernels.intrinsics (atomics, futex, calling a
span kernel by address), and kernels.span_fns, the table of span kernels: the one edge
back into the kernel subsystems (tests/unit/test_architecture.py). Importing this
package imports no numba.
"""
