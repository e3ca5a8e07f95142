"""Per-channel 256-entry lookup: the kernel behind onnxexec's ChannelLut op."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def _apply(x, table, out):  # pragma: no cover - numba
    n, c, p = x.shape
    for i in range(n):
        for ch in range(c):
            t = table[ch]
            for j in range(p):
                out[i, ch, j] = t[x[i, ch, j]]


def channel_lut(x: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    """out[n, c, p] = table[c, x[n, c, p]] for x (N, C, P) uint8, table (C, 256)."""
    _apply(x, table, out)
