"""8-bit matmuls on the integer GEMM (kernels/linalg/igemm.py), weights packed once.

`PackedInt8` is a constant weight packed at planning time by a handler's `prepare`
hook (ops/registry.py); `int8_matmul` multiplies an 8-bit A with it and finishes in
int32 or, scaled, in float32, splitting the column tiles over the session's threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxexec.kernels.objload import lazy_module
from onnxexec.native.parallel import parallel_for

# imported at first use: igemm's tiles are numba intrinsics, so importing it imports
# numba, which a model without 8-bit ops must not pay for (kernels/objload)
igemm = lazy_module("onnxexec.kernels.linalg.igemm")


class PackedInt8:
    """W (K, N) 8-bit and its zero point (scalar or per column) as igemm wants them:
    the packed shifted codes, their column sums and the zero points in shifted codes."""

    __slots__ = ("colsum", "k", "n", "packed", "w", "zero_point", "zw")

    def __init__(
        self,
        w: np.ndarray,
        zero_point: np.ndarray | None,
        trans: bool = False,
        source: np.ndarray | None = None,
    ) -> None:
        # `source`: the array calls pass (a conv's 4-D weight) when w is a view of it
        self.w, self.zero_point = (w if source is None else source), zero_point
        wk = w.T if trans else w  # QGemm's transB: W given as (N, K)
        self.k, self.n = wk.shape
        self.packed, shift = igemm.pack(wk)
        self.colsum = wk.sum(axis=0, dtype=np.int64) - shift * self.k
        zw = np.zeros(1, np.int64) if zero_point is None else np.asarray(zero_point, np.int64)
        self.zw = np.ascontiguousarray(np.broadcast_to(zw.reshape(-1) - shift, (self.n,)))

    def owns(self, w: np.ndarray, zero_point: np.ndarray | None) -> bool:
        """Whether this call's weight and zero point are the ones packed."""
        return w is self.w and zero_point is self.zero_point


def weight_fits(w: np.ndarray, zero_point: np.ndarray | None, trans: bool = False) -> bool:
    """Whether igemm takes this weight: 8-bit 2-D W whose zero point is per tensor or
    per column, exact int32 sums (K below 2^16)."""
    if w.ndim != 2 or w.dtype not in (np.uint8, np.int8):
        return False
    k, n = w.shape[::-1] if trans else w.shape
    zp = None if zero_point is None else np.asarray(zero_point)
    if zp is not None and (zp.dtype != w.dtype or zp.size not in (1, n)):
        return False
    return 0 < k < 65536


def fits(
    a: np.ndarray, w: np.ndarray, a_zero_point: np.ndarray | None, zero_point: np.ndarray | None
) -> bool:
    """Whether igemm takes A @ W: 8-bit A (..., K) with a per-tensor zero point, W as
    `weight_fits`."""
    if a.dtype not in (np.uint8, np.int8) or not weight_fits(w, zero_point):
        return False
    return a.shape[-1] == w.shape[0] and (a_zero_point is None or np.size(a_zero_point) == 1)


def packer(w_at: int, zp_at: int, trans_attr: str | None = None) -> Callable[..., Any]:
    """A `prepare` hook (ops/registry.py) packing the node's constant input w_at with
    its zero point at zp_at (transposed when attribute trans_attr is set); None when
    the weight is not a constant igemm takes."""

    def prepare(consts: tuple[Any, ...], attrs: dict[str, Any]) -> PackedInt8 | None:
        w = consts[w_at] if len(consts) > w_at else None
        zp = consts[zp_at] if len(consts) > zp_at else None
        trans = bool(attrs.get(trans_attr, 0)) if trans_attr else False
        if not isinstance(w, np.ndarray) or not weight_fits(w, zp, trans):
            return None
        return PackedInt8(w, zp, trans)

    return prepare


def packed_for(
    prepared: PackedInt8 | None, w: np.ndarray, zero_point: np.ndarray | None, trans: bool = False
) -> PackedInt8:
    """The plan's packed weight when this call's W is the one it packed, else W packed
    now (a non-constant weight: packing is O(K N), as the float path's conversion)."""
    if prepared is not None and prepared.owns(w, zero_point):
        return prepared
    return PackedInt8(w, zero_point, trans)


def _a_codes(a: np.ndarray, za: int, k: int) -> tuple[np.ndarray, int, int, int]:
    """(flat uint8 rows, lda, m, za in those codes): int8 A shifted by +128 (as its zero
    point), rows padded to a multiple of 4 bytes with zeros where K needs it."""
    rows = a.reshape(-1, k)
    if a.dtype == np.int8:
        rows = rows.view(np.uint8) ^ np.uint8(0x80)
        za += 128
    lda = -(-k // 4) * 4
    if lda != k:
        padded = np.zeros((rows.shape[0], lda), np.uint8)
        padded[:, :k] = rows
        rows = padded
    return np.ascontiguousarray(rows).reshape(-1), lda, rows.shape[0], za


def _columns(v: np.ndarray, n: int, dt: type) -> np.ndarray:
    """v (scalar or per column) as a contiguous (n,) array of dt."""
    return np.ascontiguousarray(np.broadcast_to(np.asarray(v).astype(dt).reshape(-1), (n,)))


class Product:
    """The u8 x s8 product of A's rows with a packed W and what its corrections need:
    rows (flat uint8, m rows of lda bytes, lda a multiple of 4) with zero point za in
    those codes (`a_rows` makes them from an 8-bit A)."""

    def __init__(self, flat: np.ndarray, lda: int, m: int, za: int, pw: PackedInt8) -> None:
        n_tiles = len(pw.packed) // (2 * igemm.PANEL * lda)
        self.ldc = ldc = n_tiles * igemm.PAIR
        self.c = c = np.empty(max(m * ldc, 1), np.int32)
        self.m, self.pw = m, pw
        k4s = lda // 4

        def cols(t0: int, t1: int) -> None:
            igemm.tiles(flat, lda, m, k4s, pw.packed, c, ldc, t0, t1)

        # the tiles are independent (each writes its own columns of c)
        parallel_for(cols, n_tiles, min_chunk=1 if m * lda >= 4096 else 8)
        # sum_k (a - za)(w - zw) = sum a w - zw sum_k a - za sum_k w + K za zw: the A row
        # sums only matter where some zw is not 0 (symmetric weights skip them)
        if pw.zw.any():
            self.rows = igemm.row_sums(flat, lda, m, pw.k)
        else:
            self.rows = np.zeros(max(m, 1), np.int64)
        self.colterm = pw.k * za * pw.zw - za * pw.colsum

    @classmethod
    def of(cls, a: np.ndarray, pw: PackedInt8, a_zero_point: np.ndarray | None) -> Product:
        """The product of 8-bit A (..., K) with a per-tensor zero point."""
        za = 0 if a_zero_point is None else int(np.asarray(a_zero_point).reshape(-1)[0])
        flat, lda, m, za = _a_codes(a, za, pw.k)
        return cls(flat, lda, m, za, pw)

    def int32(self) -> np.ndarray:
        """(M, N) int32 (A - za)(W - zw), wrapping modulo 2^32 as int32 sums do."""
        pw = self.pw
        out = np.empty((self.m, pw.n), np.int32)
        igemm.finish_int32(self.c, self.ldc, self.rows, pw.zw, self.colterm, out, 0, self.m)
        return out

    def floats(self, mult: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """(M, N) float32 float32((A - za)(W - zw)) * mult + bias (per column or scalar)."""
        pw = self.pw
        mv = _columns(mult, pw.n, np.float32)
        bv = _columns(np.zeros(1) if bias is None else bias, pw.n, np.float32)
        out = np.empty((self.m, pw.n), np.float32)

        def finish(r0: int, r1: int) -> None:
            igemm.finish_float(
                self.c, self.ldc, self.rows, pw.zw, self.colterm, mv, bv, out, r0, r1
            )

        parallel_for(finish, self.m, min_chunk=16)
        return out

    def requant(
        self, bias: np.ndarray | None, mult: np.ndarray, yz: int, out: np.ndarray
    ) -> np.ndarray:
        """out (B, N, P) 8-bit: QuantizeLinear(float32(product + bias) * mult, yz) of row
        r at out[r // P, :, r % P]."""
        pw = self.pw
        bv = _columns(np.zeros(1) if bias is None else bias, pw.n, np.int64)
        mv = _columns(mult, pw.n, np.float32)

        def finish(r0: int, r1: int) -> None:
            igemm.finish_requant(
                self.c, self.ldc, self.rows, pw.zw, self.colterm, bv, mv, yz, out, r0, r1
            )

        parallel_for(finish, self.m, min_chunk=64)
        return out


def int8_matmul(
    a: np.ndarray,
    pw: PackedInt8,
    a_zero_point: np.ndarray | None,
    mult: np.ndarray | None = None,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """(A - za)(W - zw) for A (..., K): int32 when mult is None, else float32
    float(that) * mult + bias (mult, bias per column or scalar, float32)."""
    pr = Product.of(a, pw, a_zero_point)
    y = pr.int32() if mult is None else pr.floats(mult, bias)
    return y.reshape(*a.shape[:-1], pw.n)
