"""Quantized matmul straight from GGUF weights: prepare once, then multiply many times.

    w = prepare_weight(raw, ggml_type, (N, K))   # relayout at load; no float32 copy
    y = qmatmul(x, w)                            # x (T, K) f32 -> y = x @ W^T (T, N) f32
    e = qembedding(w, ids)                       # rows of W, dequantized (bit-exact)

Two paths (`mode`):
- "int8" (default for T < BLAS_MIN_T, i.e. decoding): activations are quantized per
  32 values to int8 as llama.cpp does (actquant.py) and each weight block is dotted
  with exact integer sums, over the row-interleaved layout of lanes.py. This changes
  results slightly versus a float dot product (about 0.5% of the output's scale, from
  rounding the activations to 8 bits) - the same rounding llama.cpp applies, which is
  why its logits are matched more closely this way. Fast kernels: Q4_0, Q4_1, Q5_0,
  Q5_1, Q8_0, Q4_K, Q5_K, Q6_K. Problems under lanes.PAR_MIN_MACS multiply-adds run
  on the calling thread (waking the pool costs more than they do).
- "float" (default for T >= BLAS_MIN_T, i.e. prompt processing): W is dequantized
  panel by panel (P rows at a time, cache-sized, bit-exact with `dequantize`) and
  multiplied with BLAS in float32; no activation rounding.
Other types (F16, BF16, Q2_K, Q3_K, IQ4_NL, IQ4_XS) keep their raw bytes and always
take the float path (dequantized panels + BLAS); F32 weights multiply directly.

Weights of one type and row length can be fused (`fuse_rows`), e.g. Q, K and V: one
call and one thread-pool wake-up instead of three, with the outputs side by side in y;
the parts become views of the fused arrays (no second copy). `quantize_act` +
`qmatmul_q` let several matmuls share one quantized activation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.lanes import LANES, pick
from onnxexec.kernels.quant import ggml_matmul as ggml_matmul_module
from onnxexec.kernels.quant import qtypes as q
from onnxexec.kernels.quant.actquant import quantize_act
from onnxexec.kernels.quant.dequant import (
    SUPPORTED_TYPES,
    block_geometry,
    dequantize,
    dequantize_into,
)
from onnxexec.kernels.quant.ggml_dot import SIMD_TYPES, simd_ok
from onnxexec.kernels.quant.ggml_dot_k import TILED_MIN_T, quantize_q8_k
from onnxexec.kernels.quant.ggml_matmul import RAW_TYPES as GGML_RAW_TYPES
from onnxexec.kernels.quant.ggml_matmul import ROUTED_TYPES as GGML_ROUTED_TYPES
from onnxexec.kernels.quant.ggml_matmul import ggml_matmul
from onnxexec.kernels.quant.qgemm_exact import GEMM_MIN_T, gemm_exact
from onnxexec.kernels.quant.qgemm_exact_k import q4k_gemm_tiles, q6k_gemm_tiles
from onnxexec.kernels.quant.qlayout import nib_layout, q6_k_layout, q8_0_layout
from onnxexec.kernels.quant.qmv_exact import EXACT_KERNELS
from onnxexec.kernels.quant.qmv_exact_k import (
    K_EXACT_TYPES,
    QMV_Q4K_EXACT,
    lanes_ok,
    qmatmul_k_exact,
)
from onnxexec.kernels.quant.qmv_nib import DEQ_NIB_PANEL, DEQ_NIB_ROWS, QMV_NIB
from onnxexec.kernels.quant.qmv_q8 import (
    DEQ_Q6K_PANEL,
    DEQ_Q6K_ROWS,
    DEQ_Q8_PANEL,
    DEQ_Q8_ROWS,
    QMV_Q6K,
    QMV_Q8,
)
from onnxexec.kernels.quant.vnni_q4k import PACKED_Q4_K, packable, repack

BLAS_MIN_T: Final = tuning.QMATMUL_BLAS_MIN_T
PANEL_BYTES: Final = tuning.QMATMUL_PANEL_BYTES

_NIB_TYPES = (q.Q4_0, q.Q4_1, q.Q5_0, q.Q5_1, q.Q4_K, q.Q5_K)
FAST_TYPES: frozenset[int] = frozenset((*_NIB_TYPES, q.Q8_0, q.Q6_K))


@dataclass(frozen=True, eq=False)
class QWeight:
    """A (N, K) weight ready for qmatmul/qembedding. `layout` names the array set:
    "nib" / "q8_0" / "q6_k" (lanes layouts), "raw" (GGUF bytes), "f32" (a float view).
    `args` are the lanes kernels' leading arguments, gathered once (decode calls
    qmatmul hundreds of times per token). A part of a `fuse_rows` weight has `parent`
    set and its rows at output columns [col0, col0 + N) of the parent's product."""

    ggml_type: int
    shape: tuple[int, int]
    layout: str
    arrays: dict[str, Any] = field(repr=False)
    args: tuple[Any, ...] = field(default=(), repr=False)
    parent: QWeight | None = field(default=None, repr=False)
    col0: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes held (a memmap view of the file counts too)."""
        return sum(a.nbytes for a in self.arrays.values() if isinstance(a, np.ndarray))

    def __repr__(self) -> str:
        return (
            f"QWeight({q.type_name(self.ggml_type)}, shape={self.shape}, "
            f"layout={self.layout!r}, nbytes={self.nbytes})"
        )


def prepare_weight(raw: np.ndarray, ggml_type: int, shape: tuple[int, ...]) -> QWeight:
    """Raw GGUF bytes of a (N, K) weight -> QWeight (relayout for the fast types; the
    raw bytes are kept as they are, zero-copy, for the others). 1-D shapes are (1, K)."""
    t = int(ggml_type)
    flat, shp = _checked_bytes(raw, t, shape)
    n, k = shp
    if relayouted(t, n):
        layout, a = _lanes_stack([flat], t, [n], k)
        release_pages(flat)
        return with_arrays(QWeight(t, shp, layout, {}), shp, a)
    if t == q.F32:
        return QWeight(t, shp, "f32", {"w": dequantize(flat, t, shp)})
    block, size = block_geometry(t)
    arrays = {"raw": flat, "row_bytes": k // block * size}
    if packable(t, n) and simd_ok(t, n):  # AVX-512 VNNI: a repacked copy (vnni_q4k)
        packed = repack(flat, n, k)
        # the GGUF bytes' flags (a read-only memmap): numba needs the weights of one
        # simd_dot_many call to be one array type (a tuple it can index)
        packed.flags.writeable = flat.flags.writeable
        arrays["packed"] = packed
        release_pages(flat)  # the GGUF bytes stay for dequantization, paged out
    return QWeight(t, shp, "raw", arrays)


def simd_operand(w: QWeight) -> tuple[np.ndarray, int, int]:
    """(bytes, row bytes, ggml type) of a "raw" weight for ggml_dot.simd_dot_many: its
    vnni_q4k repacked copy (pseudo type PACKED_Q4_K) when it has one, else its GGUF bytes."""
    if "packed" in w.arrays:
        return w.arrays["packed"], int(w.arrays["row_bytes"]), PACKED_Q4_K
    return w.arrays["raw"], int(w.arrays["row_bytes"]), int(w.ggml_type)


def relayouted(ggml_type: int, n_rows: int) -> bool:
    """True when prepare_weight copies a (n_rows, K) weight of this type into a lanes
    layout (else it keeps the GGUF bytes, or a float32 view for F32)."""
    t = int(ggml_type)
    if t in K_EXACT_TYPES and lanes_ok(t, n_rows) and not simd_ok(t, n_rows):
        return True  # llama.cpp's order on lanes (qmv_exact_k)
    # -- llama.cpp-order kernels (F4, ggml_matmul.py): these types keep their GGUF bytes
    if t in GGML_RAW_TYPES or t in SIMD_TYPES:  # SIMD_TYPES: ggml_simd's AVX2 kernels
        return False
    # -- end F4
    return t in _NIB_TYPES or t == q.Q8_0 or t == q.Q6_K


def _checked_bytes(
    raw: np.ndarray, t: int, shape: tuple[int, ...]
) -> tuple[np.ndarray, tuple[int, int]]:
    """The weight's bytes as a flat uint8 view and its (N, K) shape, checked."""
    shp = tuple(int(s) for s in shape)
    if len(shp) == 1:
        shp = (1, shp[0])
    if len(shp) != 2:
        raise ValueError(f"prepare_weight: expected a 2-D weight, got shape {shp}")
    n, k = shp
    block, size = block_geometry(t)  # raises NotImplementedError for unsupported types
    flat = np.asarray(raw).reshape(-1).view(np.uint8)
    need = n * (k // block) * size
    if k % block or flat.size != need:
        raise ValueError(
            f"{q.type_name(t)} weight {shp}: expected {need} bytes "
            f"(row length a multiple of {block}), got {flat.size}"
        )
    return flat, (n, k)


def prepare_fused(
    raws: list[np.ndarray], ggml_type: int, shapes: list[tuple[int, ...]]
) -> tuple[QWeight, list[QWeight]]:
    """fuse_rows([prepare_weight(r, ggml_type, s) for r, s in zip(raws, shapes)]),
    built in place: every part is relayouted straight into its rows of the fused
    arrays, so no per-part copy exists even for a moment (the file pages read are
    released as they are done). All parts must be `relayouted`, with one row length."""
    t = int(ggml_type)
    checked = [_checked_bytes(r, t, s) for r, s in zip(raws, shapes, strict=True)]
    k = checked[0][1][1]
    if not all(shp[1] == k and relayouted(t, shp[0]) for _, shp in checked):
        raise ValueError(f"prepare_fused: not relayouted weights of one row length: {shapes}")
    ns = [shp[0] for _, shp in checked]
    layout, a = _lanes_stack([flat for flat, _ in checked], t, ns, k)
    for flat, _ in checked:
        release_pages(flat)
    ng = sum(-(-n // LANES) for n in ns)
    fused = with_arrays(QWeight(t, (ng * LANES, k), layout, {}), (ng * LANES, k), a)
    return fused, _parts(fused, [QWeight(t, shp, layout, {}) for _, shp in checked])


RELAYOUT_ROWS: Final = tuning.QMATMUL_RELAYOUT_ROWS


def _layout(raw: np.ndarray, t: int, n: int, k: int) -> tuple[str, dict[str, Any]]:
    if t == q.Q8_0:
        return "q8_0", q8_0_layout(raw, n, k)
    if t == q.Q6_K:
        return "q6_k", q6_k_layout(raw, n, k)
    return "nib", nib_layout(raw, t, n, k)


def _lanes_stack(
    flats: list[np.ndarray], t: int, ns: list[int], k: int
) -> tuple[str, dict[str, Any]]:
    """The lanes layout of weights (n_i, k) stacked row-wise, each part starting on a
    LANES boundary, built RELAYOUT_ROWS rows at a time into the final arrays (the
    numpy relayout makes a few temporary copies of its input)."""
    block, size = block_geometry(t)
    row_bytes = k // block * size
    first = min(ns[0], RELAYOUT_ROWS)
    layout, a = _layout(flats[0][: first * row_bytes], t, first, k)
    if len(ns) == 1 and ns[0] == first:
        return layout, a
    keys = _grouped_keys(QWeight(t, (first, k), layout, a))
    ngs = [-(-n // LANES) for n in ns]
    full = dict(a)
    for key in keys:
        full[key] = np.empty((sum(ngs), *a[key].shape[1:]), a[key].dtype)
    g0 = 0
    for flat, n, ng in zip(flats, ns, ngs, strict=True):
        for r0 in range(0, n, RELAYOUT_ROWS):
            rows = min(RELAYOUT_ROWS, n - r0)
            if a is None:
                _, a = _layout(flat[r0 * row_bytes : (r0 + rows) * row_bytes], t, rows, k)
            gs = g0 + r0 // LANES
            for key in keys:
                full[key][gs : gs + a[key].shape[0]] = a[key]
            a = None
        g0 += ng
    return layout, full


def release_pages(raw: np.ndarray) -> None:
    """Tell the kernel that the file pages under a read-only np.memmap view are not
    needed any more (madvise MADV_DONTNEED): they leave the process's resident set,
    and are read again from the page cache if ever touched. No-op for other arrays."""
    base = raw
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    mm = getattr(base, "_mmap", None)
    if mm is None or base.mode != "r" or not hasattr(mm, "madvise"):
        return
    import mmap

    mm_addr = np.frombuffer(mm, np.uint8).__array_interface__["data"][0]
    start = raw.__array_interface__["data"][0] - mm_addr
    page = mmap.PAGESIZE
    lo = -(-start // page) * page  # whole pages inside the view only
    hi = (start + raw.nbytes) // page * page
    if hi > lo:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def qmatmul(
    x: np.ndarray, w: QWeight, *, mode: str = "auto", out: np.ndarray | None = None
) -> np.ndarray:
    """x (T, K) float32 @ W^T -> (T, N) float32, W (N, K) the prepared GGUF weight.

    mode: "auto" (int8 below BLAS_MIN_T rows, else float), "int8" or "float"; see the
    module docstring for the numerics of each. `out` may be given (T, N) float32,
    C-contiguous, to avoid the allocation.
    """
    n, k = w.shape
    if not (type(x) is np.ndarray and x.dtype == np.float32 and x.flags.c_contiguous):
        x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] != k:
        raise ValueError(f"qmatmul: x must be (T, {k}), got {x.shape}")
    t_rows = x.shape[0]
    if out is None:
        out = np.empty((t_rows, n), np.float32)
    elif out.shape != (t_rows, n) or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError(f"qmatmul: out must be C-contiguous float32 {(t_rows, n)}")
    if mode != "auto" and mode != "int8" and mode != "float":
        raise ValueError(f"qmatmul: mode must be 'auto', 'int8' or 'float', got {mode!r}")
    if t_rows == 0:
        return out
    if (
        w.ggml_type in K_EXACT_TYPES
        and w.args
        and (mode == "int8" or (mode == "auto" and t_rows < BLAS_MIN_T))
    ):
        if t_rows >= max(GEMM_MIN_T, TILED_MIN_T):  # Q6_K's tiled order from 8 rows
            return _k_tiles(x, w, out)
        return qmatmul_k_exact(x, w.args, w.ggml_type, out)
    # -- llama.cpp-order kernels (F4): mode "int8" means llama.cpp's numerics
    if (w.ggml_type in GGML_ROUTED_TYPES or (w.layout == "raw" and w.ggml_type in SIMD_TYPES)) and (
        mode == "int8" or (mode == "auto" and t_rows < BLAS_MIN_T)
    ):
        return ggml_matmul(x, w, out)
    # -- end F4
    if w.args and (mode == "int8" or (mode == "auto" and t_rows < BLAS_MIN_T)):
        xq, xst = quantize_act(x)
        qmatmul_q(xq, xst, w, out)
    elif w.layout == "f32":
        np.matmul(x, w.arrays["w"].T, out=out)
    else:
        _float_matmul(x, w, out)
    return out


def _k_tiles(x: np.ndarray, w: QWeight, out: np.ndarray) -> np.ndarray:
    """qmatmul_k_exact's result (llama.cpp's order) for GEMM_MIN_T rows or more, from
    qgemm_exact_k's tiled kernels: Q4_K rows in whole groups of 4 take the gemm order,
    the last T % 4 rows qmv_exact_k's (gemv order); Q6_K rows the tiled order."""
    t_rows = x.shape[0]
    if w.ggml_type == q.Q6_K:
        xq, xd, _ = quantize_q8_k(x, 0)
        q6k_gemm_tiles(w.args, xq, xd, out)
        return out
    rows4 = t_rows - t_rows % 4
    xq, xd, bsums = quantize_q8_k(x, rows4)
    q4k_gemm_tiles(w.args, xq[:rows4], xd[:rows4], bsums[:rows4], out[:rows4])
    if rows4 < t_rows:
        QMV_Q4K_EXACT[1](
            *w.args, xq[rows4:].astype(np.int16), xd[rows4:], bsums[rows4:], 0, out[rows4:], 1
        )
    return out


def int8_kernels(w: QWeight) -> tuple[Any, Any]:
    """The (parallel, serial) kernels of w's int8 path: llama.cpp's summation order for
    the types ggml_matmul.LANES_KERNELS lists (qmv_exact's kernels, bit-identical with
    ggml_dot's and faster), else the lanes kernels of w's layout."""
    t = w.ggml_type
    lanes_kernels = getattr(ggml_matmul_module, "LANES_KERNELS", {})
    if t in lanes_kernels:
        return EXACT_KERNELS.get(t, lanes_kernels[t])
    return _QMV[w.layout]


def int8_path(w: QWeight, t_rows: int, mode: str) -> bool:
    """True when qmatmul(x, w, mode=mode) with t_rows rows quantizes the activations
    with quantize_act (then qmatmul_q(*quantize_act(x), w, out) gives the same result;
    not for Q4_K / Q6_K, whose activations are Q8_K)."""
    if w.ggml_type in K_EXACT_TYPES:
        return False
    return bool(w.args) and (mode == "int8" or (mode == "auto" and t_rows < BLAS_MIN_T))


def qmatmul_q(xq: np.ndarray, xst: np.ndarray, w: QWeight, out: np.ndarray) -> np.ndarray:
    """The int8 path of qmatmul from already quantized activations (quantize_act(x)):
    out (T, N) f32, C-contiguous, equals qmatmul(x, w, mode="int8") bit for bit.

    Preconditions (checked, ValueError otherwise; the kernels index all three without
    bounds checks): xq (T, K), xst (T, 3, K/32), out a C-contiguous float32 (T, N)."""
    n, k = w.shape
    t_rows = xq.shape[0] if xq.ndim == 2 else -1
    if xq.shape != (t_rows, k) or xst.shape != (t_rows, 3, k // 32):
        raise ValueError(
            f"qmatmul_q: activations {list(xq.shape)} / scales {list(xst.shape)} "
            f"for a weight of {k} columns"
        )
    if out.shape != (t_rows, n) or out.dtype != np.float32 or not out.flags.c_contiguous:
        raise ValueError(f"qmatmul_q: out must be C-contiguous float32 {(t_rows, n)}")
    if xq.shape[0] >= GEMM_MIN_T and w.ggml_type in EXACT_KERNELS and w.layout != "raw":
        gemm_exact(w.args, w.layout, xq, xst, out)  # same bits, tiled over activation rows
        return out
    kern, n_chunks = pick(int8_kernels(w), xq.shape[0] * n * k)
    kern(*w.args, xq, xst, out, n_chunks)
    return out


_GROUPED = {  # arrays with one entry per group of LANES rows (the rest are placeholders)
    "nib": ("qs", "qh", "fsc", "usc"),
    "q8_0": ("qs", "d"),
    "q6_k": ("ql", "qh", "sc", "d"),
}


def _grouped_keys(w: QWeight) -> tuple[str, ...]:
    ng = -(-w.shape[0] // LANES)
    keys = _GROUPED[w.layout]
    if w.layout == "nib":  # Q4 types have an empty qh, non-K types a dummy usc
        keys = tuple(
            key
            for key in keys
            if not (key == "qh" and w.ggml_type not in (q.Q5_0, q.Q5_1, q.Q5_K))
            and not (key == "usc" and w.ggml_type not in (q.Q4_K, q.Q5_K))
        )
    assert all(w.arrays[key].shape[0] == ng for key in keys)
    return keys


def can_fuse_rows(ws: list[QWeight]) -> bool:
    """True when fuse_rows accepts these weights: one lanes layout, type and row length.

    Not GGUF-byte ("raw") weights: the llama.cpp-order kernels pick their summation
    order by the weight's row count (tinyBLAS or not), so stacking rows could change
    a row's result."""
    w0 = ws[0]
    return w0.layout in _GROUPED and all(
        w.layout == w0.layout and w.ggml_type == w0.ggml_type and w.shape[1] == w0.shape[1]
        for w in ws
    )


def fuse_rows(ws: list[QWeight]) -> tuple[QWeight, list[QWeight]]:
    """Stack weights of one type and row length into one (sum N_i', K) weight.

    Each part starts on a LANES boundary (N_i' = N_i rounded up to LANES; a padded
    row's output is 0). Returns the fused weight and the parts re-made as views of
    its arrays (with `parent`/`col0` set), so the originals can be dropped. A row's
    result does not depend on the other rows, so fused products equal the separate
    ones bit for bit.
    """
    if not can_fuse_rows(ws):
        raise ValueError(f"fuse_rows: weights differ in layout, type or row length: {ws}")
    w0 = ws[0]
    keys = _grouped_keys(w0)
    k = w0.shape[1]
    arrays = dict(w0.arrays)
    for key in keys:
        arrays[key] = np.concatenate([w.arrays[key] for w in ws])
    ng = arrays[keys[0]].shape[0]
    fused = with_arrays(w0, (ng * LANES, k), arrays)
    return fused, _parts(fused, ws)


def _parts(fused: QWeight, ws: list[QWeight]) -> list[QWeight]:
    """ws re-made as views of the consecutive LANES-aligned row groups of `fused`."""
    keys = _grouped_keys(fused)
    parts, g0 = [], 0
    for w in ws:
        ngi = -(-w.shape[0] // LANES)
        view = dict(fused.arrays)
        for key in keys:
            view[key] = fused.arrays[key][g0 : g0 + ngi]
        parts.append(with_arrays(w, w.shape, view, fused, g0 * LANES))
        g0 += ngi
    return parts


def with_arrays(
    w: QWeight,
    shape: tuple[int, int],
    a: dict[str, Any],
    parent: QWeight | None = None,
    col0: int = 0,
) -> QWeight:
    order = {
        "nib": ("qs", "qh", "fsc", "usc", "kind", "off"),
        "q8_0": ("qs", "d"),
        "q6_k": ("ql", "qh", "sc", "d"),
    }[w.layout]
    return QWeight(w.ggml_type, shape, w.layout, a, tuple(a[key] for key in order), parent, col0)


_QMV = {"nib": QMV_NIB, "q8_0": QMV_Q8, "q6_k": QMV_Q6K}
_DEQ_PANEL = {"nib": DEQ_NIB_PANEL, "q8_0": DEQ_Q8_PANEL, "q6_k": DEQ_Q6K_PANEL}
_DEQ_ROWS = {"nib": DEQ_NIB_ROWS, "q8_0": DEQ_Q8_ROWS, "q6_k": DEQ_Q6K_ROWS}


def _float_matmul(x: np.ndarray, w: QWeight, out: np.ndarray) -> None:
    """out = x @ W^T, W dequantized one cache-sized panel of rows at a time.

    The panels are dequantized on the calling thread while BLAS runs its own threads:
    handing every panel back and forth between numba's and BLAS's thread pools costs
    far more than the dequantization (a tenth of the GEMM's time at T = 128).
    """
    n, k = w.shape
    rows = max(LANES, PANEL_BYTES // (4 * k) // LANES * LANES)
    if w.layout == "raw":
        raw, rb = w.arrays["raw"], w.arrays["row_bytes"]
        panel = np.empty((min(rows, n), k), np.float32)
        for n0 in range(0, n, rows):
            p = min(rows, n - n0)
            dequantize_into(raw[n0 * rb : (n0 + p) * rb], w.ggml_type, panel[:p])
            np.matmul(x, panel[:p].T, out=out[:, n0 : n0 + p])
        return
    args = w.args
    deq = _DEQ_PANEL[w.layout]
    panel = np.empty((k, min(rows, -(-n // LANES) * LANES)), np.float32)
    for n0 in range(0, n, rows):
        p = min(rows, -(-(n - n0) // LANES) * LANES)  # whole groups
        dst = panel if p == panel.shape[1] else np.empty((k, p), np.float32)
        deq[1](*args, n0 // LANES, dst)  # serial: BLAS owns the threads here
        nv = min(p, n - n0)
        np.matmul(x, dst[:, :nv], out=out[:, n0 : n0 + nv])


def qembedding(w: QWeight, ids: np.ndarray) -> np.ndarray:
    """Rows `ids` of W dequantized -> (len(ids), K) float32, bit-exact with dequantize."""
    n, k = w.shape
    idx = np.asarray(ids, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx[(idx < 0) | (idx >= n)][0])
        raise IndexError(f"qembedding: id {bad} out of range for {n} rows")
    if w.layout == "f32":
        return w.arrays["w"][idx]
    out = np.empty((idx.size, k), np.float32)
    if w.layout == "raw":
        raw, rb = w.arrays["raw"], w.arrays["row_bytes"]
        for i, r in enumerate(idx):
            dequantize_into(raw[r * rb : (r + 1) * rb], w.ggml_type, out[i])
        return out
    kern, _ = pick(_DEQ_ROWS[w.layout], idx.size * k * 8)
    kern(*w.args, idx, out)
    return out


def is_fast(ggml_type: int) -> bool:
    """True when qmatmul has an int8 lanes kernel for the type."""
    return int(ggml_type) in FAST_TYPES


def supported(ggml_type: int) -> bool:
    """True when prepare_weight accepts the type."""
    return int(ggml_type) in SUPPORTED_TYPES
