"""ChannelLut (domain onnxexec): y[n, c, ...] = table[c, byte of x[n, c, ...]].

passes/fuse_qdq.py emits it for DequantizeLinear -> per-channel float ops ->
QuantizeLinear chains: the table holds, for every channel and each of the 256 codes
of x's type, the chain's own output (computed at planning by the same handlers), so
the op is exact with respect to running the chain. Rows are indexed by the code's
byte (an int8 code v at v & 0xFF), so x is read as uint8 whatever its type.
"""

from __future__ import annotations

import numpy as np

from onnxexec.kernels.quant.lut import channel_lut
from onnxexec.ops.registry import op


@op("ChannelLut", 1, domain="onnxexec")
def channel_lut_op(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """x (N, C, ...) 8-bit, table (C, 256) or (1, 256) 8-bit: y of table's type."""
    c = table.shape[0]
    if x.dtype not in (np.uint8, np.int8) or table.ndim != 2 or table.shape[1] != 256:
        raise ValueError(
            f"ChannelLut: x must be 8-bit and table (C, 256), got x {x.dtype} "
            f"and table {table.shape}"
        )
    if c > 1 and (x.ndim < 2 or x.shape[1] != c):
        raise ValueError(f"ChannelLut: x {x.shape} has no channel axis 1 of size {c}")
    lead = x.shape[0] if c > 1 else 1
    xs = np.ascontiguousarray(x).view(np.uint8).reshape(lead, c, -1)
    out = np.empty(xs.shape, table.dtype)
    channel_lut(xs, np.ascontiguousarray(table), out)
    return out.reshape(x.shape)
