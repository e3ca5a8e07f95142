"""numba kernels; one module per kernel family.

Importing this package first tells numba that BLAS exists without importing
scipy.linalg. numba's CPU target imports `numba.np.arraymath` on its first compile or
cached-kernel load, and that module's top level runs `_check_blas()`, which imports
`scipy.linalg.cython_blas` only to learn whether it could: about 0.1-0.5 s and 16-29 MB
(measured here) in every process, before any kernel runs. The answer (`_HAVE_BLAS`)
only picks np.convolve/np.correlate's inner product; np.dot and np.linalg still call
numba's real `ensure_blas` when they are compiled, and numba's runtime imports the
BLAS pointers it needs when such code runs. So the check is answered from whether scipy
is installed at all (`find_spec` imports nothing) and scipy.linalg loads only for code
that uses it.
"""

from __future__ import annotations

import importlib.util
import sys


def _defer_scipy_blas_check() -> None:
    if "numba.np.arraymath" in sys.modules:
        return
    import numba.np.linalg as nplinalg

    real = nplinalg.ensure_blas

    def scipy_installed() -> None:
        if importlib.util.find_spec("scipy") is None:
            raise ImportError("scipy is required for linear algebra")

    nplinalg.ensure_blas = scipy_installed
    try:
        import numba.np.arraymath as arraymath
    finally:
        nplinalg.ensure_blas = real
    # arraymath bound the name at import; later callers get numba's own check
    arraymath.ensure_blas = real


_defer_scipy_blas_check()
