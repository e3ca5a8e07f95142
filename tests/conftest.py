from __future__ import annotations

import os

# Keep tests deterministic on the 2-core CI machine: numba and BLAS use 2 threads.
os.environ.setdefault("NUMBA_NUM_THREADS", "2")
