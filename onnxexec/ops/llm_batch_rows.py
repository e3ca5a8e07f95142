"""The N-row (one token of each of N sequences) paths of SlotAttnBlock and SlotFFNBlock
with their weights' kernel arguments prepared once per node.

A batched decode pass of a small model spends a third of its time outside the matmul
kernels: every product goes through qmatmul / simd_dot_many's dispatch (type checks,
argument tuples, kernel choice) and every row's attention through a wrapper, ~120 of
each per pass. `RowDots` keeps one product's (raws, row bytes, kinds, column offsets)
and calls ggml_simd_k's DOT_MANY kernel directly with the arguments simd_dot_many
passes it, so every output bit is the same (the kernel and its inputs are); the
activations are quantized by the same functions (actquant.quantize_act8 equals
quantize_act's values as int8, which ggml_matmul hands to the same kernel).
Only weights of ggml_simd's block kinds (Q4_0 .. Q8_0) take this path; anything else
(K-quants, float matrices, no AVX2) keeps the ops' general code (ops/llm_batch.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxexec.kernels.attn.attend_one import PAR_MIN_ATTN
from onnxexec.kernels.attn.attention import ggml_n_kv
from onnxexec.kernels.attn.llm_fused import ATTEND_ONE, norm_quant8, rope_store_one
from onnxexec.kernels.math.lanes import pick
from onnxexec.kernels.quant import ggml_simd, ggml_simd_k
from onnxexec.kernels.quant.actquant import quantize_act8
from onnxexec.kernels.quant.ggml_dot import MULTI, NO_XK
from onnxexec.kernels.quant.qmatmul import BLAS_MIN_T, QWeight
from onnxexec.ops.llm import gated_act
from onnxexec.ops.llm_decode import DecodeState, all_simd, prepare_decode


@dataclass(frozen=True)
class RowDots:
    """[W_1 . x | W_2 . x | ...] for weights of ggml_simd's block kinds, one row length."""

    raws: tuple[np.ndarray, ...]
    rbs: tuple[int, ...]
    kinds: tuple[int, ...]
    col0s: tuple[int, ...]
    widths: tuple[int, ...]  # output columns per weight
    k: int

    @classmethod
    def of(cls, ws: tuple[Any, ...], mode: str) -> RowDots | None:
        """None unless every weight takes simd_dot_many's block-kind path for few rows."""
        if not all(isinstance(w, QWeight) for w in ws) or not all_simd(ws, 2, mode):
            return None
        if not all(w.ggml_type in ggml_simd.KINDS for w in ws):
            return None
        widths = tuple(w.arrays["raw"].shape[0] // int(w.arrays["row_bytes"]) for w in ws)
        col0s = tuple(int(c) for c in np.cumsum((0, *widths[:-1])))
        return cls(
            tuple(w.arrays["raw"] for w in ws),
            tuple(int(w.arrays["row_bytes"]) for w in ws),
            tuple(ggml_simd.KINDS[w.ggml_type] for w in ws),
            col0s,
            widths,
            ws[0].shape[1],
        )

    def __call__(self, x8: np.ndarray, xst: np.ndarray) -> np.ndarray:
        """(T, sum N) float32 from quantize_act8's (x8, xst): simd_dot_many's _call."""
        t = x8.shape[0]
        out = np.empty((t, sum(self.widths)), np.float32)
        kern, n_chunks = pick(ggml_simd_k.DOT_MANY, t * out.shape[1] * self.k)
        kern(self.raws, self.rbs, self.kinds, self.col0s, x8, xst, *NO_XK, t - t % 4,
             out, n_chunks, ggml_simd.COLS if MULTI else 1)  # fmt: skip
        return out


@dataclass
class RowsState:
    """A node's prepared products for T rows (None: the general path) and the fused
    op's one-token state (a single sequence runs the one-token op itself)."""

    dots: tuple[RowDots, ...] | None
    one: DecodeState
    mode: str

    def rows(self, t: int) -> tuple[RowDots, ...] | None:
        """The products for t rows, when qmatmul would take the int8 kernels for t."""
        if self.mode == "int8" or (self.mode == "auto" and t < BLAS_MIN_T):
            return self.dots
        return None


def prepare_rows(first: int, groups: tuple[int, ...]) -> Any:
    """A prepare hook: RowDots for consecutive weight inputs from `first` (group sizes
    `groups`, e.g. (3, 1) for Q|K|V then O), None when a group can't take them."""

    def prepare(consts: tuple[Any, ...], attrs: dict) -> RowsState:
        mode = attrs.get("mode", "auto")
        one = prepare_decode(first, sum(groups))(consts, attrs)
        dots, i = [], first
        for n in groups:
            d = RowDots.of(tuple(consts[i : i + n]), mode)
            if d is None:
                return RowsState(None, one, mode)
            dots.append(d)
            i += n
        return RowsState(tuple(dots), one, mode)

    return prepare


def ffn_rows(
    x: np.ndarray, norm_w: np.ndarray, eps: float, act: str, dots: tuple[RowDots, ...]
) -> np.ndarray:
    """FFNBlock of T rows (ops/llm_fused.ffn_block's T > 1 path, same bits)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    h = np.empty_like(x)
    gu = dots[0](*norm_quant8(x, norm_w, np.float32(eps), h))
    n_g = dots[0].widths[0]
    f = gated_act(np.ascontiguousarray(gu[:, :n_g]), np.ascontiguousarray(gu[:, n_g:]), act=act)
    return x + dots[1](*quantize_act8(np.ascontiguousarray(f, dtype=np.float32)))


def attn_rows(
    x: np.ndarray,
    norm_w: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    pos: list[int],
    slot: list[int],
    dots: tuple[RowDots, ...],
    eps: float,
    head_dim: int,
    n_dims: int,
    base: float,
    freq_scale: float,
    neox: bool,
    q_scale: float,
    scale: float,
    window: int,
    softcap: float,
) -> np.ndarray:
    """SlotAttnBlock of T rows, row i at pos[i] of cache slot[i] (ops/llm_batch.py's
    kv_f16 path: RoPE + cache write + one-token attention per row, same kernels)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    h = np.empty_like(x)
    qkv = dots[0](*norm_quant8(x, norm_w, np.float32(eps), h))
    nq, nk, _ = dots[0].widths
    width = nq
    a = np.empty((x.shape[0], width), np.float32)
    qr = np.empty(width, np.float32)
    f_base, f_scale = np.float32(base), np.float32(freq_scale)
    f_q, f_cap = np.float32(q_scale), np.float32(softcap)
    f_s = np.float32(scale or 1.0 / math.sqrt(head_dim))
    nd = n_dims or head_dim
    for i in range(x.shape[0]):
        p, kc, vc = pos[i], k_cache[slot[i]], v_cache[slot[i]]
        rope_store_one(qkv[i : i + 1], 0, nq, nq + nk, kc, vc, p, head_dim, nd, f_base,
                       f_scale, neox, qr)  # fmt: skip
        span = p + 1 if not window else min(window, p + 1)
        kern = ATTEND_ONE[0] if width * span >= PAR_MIN_ATTN else ATTEND_ONE[1]
        kern(qr, kc, vc, p, f_q, f_s, window, f_cap, ggml_n_kv(p, 1, kc.shape[0]), a[i : i + 1])
    return x + dots[1](*quantize_act8(a))
