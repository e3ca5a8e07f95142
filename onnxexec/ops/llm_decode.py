"""The one-token (T = 1, decode) path of the fused decoder ops of ops/llm_fused.py: one
compiled call per op (kernels/attn/llm_decode.py) on weight groups whose kernel arguments
and buffers are gathered once and reused every token.

Each function returns the op's output, or None when the fast path does not apply (the
caller then takes the general path): the weights must all be GGUF bytes of ggml_simd
types (qmatmul's int8 mode), as simd_dot_many requires. The gathered arguments and
buffers live in the node's prepared state (`DecodeState`, made by the ops' prepare hook
and owned by the plan's step, so they go with the session); a call without one (a
handler called outside a plan) gathers them for itself.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any

import numba as nb
import numpy as np

from onnxexec.kernels.attn.attend_one import PAR_MIN_ATTN
from onnxexec.kernels.attn.llm_decode import (
    N_CHUNKS,
    PARALLEL,
    attn_one,
    ffn_one,
    norm_dot_one,
    ready,
)
from onnxexec.kernels.attn.llm_decode_mt import attn_region, control, ffn_region, post
from onnxexec.kernels.math.lanes import pick
from onnxexec.kernels.quant import ggml_simd, ggml_simd_k
from onnxexec.kernels.quant.ggml_dot import simd_ok
from onnxexec.kernels.quant.qmatmul import BLAS_MIN_T, QWeight, simd_operand
from onnxexec.ops.contention import free_cores

_NO_X8 = np.zeros((1, 32), np.int8)
_NO_XST = np.zeros((1, 3, 1), np.float32)
_NO_XK = (np.zeros((1, 256), np.int8), np.zeros((1, 1), np.float32), np.zeros((1, 16), np.int32))


def all_simd(ws: tuple[Any, ...], t_rows: int, mode: str) -> bool:
    """Every weight is GGUF bytes of a ggml_simd type (what qmatmul hands to ggml_dot's
    AVX2 kernels in its int8 mode), one row length."""
    if not (mode == "int8" or (mode == "auto" and t_rows < BLAS_MIN_T)):
        return False
    return all(
        isinstance(w, QWeight)
        and w.layout == "raw"
        and simd_ok(w.ggml_type, w.shape[0])
        and w.shape[1] == ws[0].shape[1]
        for w in ws
    )


def group(ws: tuple[Any, ...]) -> tuple:
    """The flat argument tuple of one weight group for kernels/attn/llm_decode.py: what
    simd_dot_many gathers and quantizes for T = 1 (one Q8_K set for both K types,
    rows4 = 0), gathered once, with its own buffers."""
    k = ws[0].shape[1]
    ops = [simd_operand(w) for w in ws]  # vnni_q4k's repacked Q4_K where there is one
    types_ = [t for _, _, t in ops]
    kinds = tuple(ggml_simd_k.kind_of(t) for t in types_)
    offs, c = [], 0
    for w in ws:
        offs.append(c)
        c += w.shape[0]
    kq = any(kd >= ggml_simd_k.Q4_K_KIND for kd in kinds)
    block = any(t in ggml_simd.KINDS for t in types_)
    x8 = np.empty((1, k), np.int8) if block else _NO_X8
    xst = np.empty((1, 3, k // 32), np.float32) if block else _NO_XST
    xk = _NO_XK
    if kq:
        xk = (np.empty((1, k), np.int8), np.empty((1, k // 256), np.float32))
        xk += (np.empty((1, k // 16), np.int32),)
    kern, n_chunks = pick(ggml_simd_k.DOT_MANY, c * k)
    return (
        np.empty((1, k), np.float32),
        x8,
        xst,
        *xk,
        np.empty((1, c), np.float32),
        tuple(a for a, _, _ in ops),
        tuple(rb for _, rb, _ in ops),
        kinds,
        tuple(offs),
        block,
        kq,
        0,
        n_chunks,
        kern is ggml_simd_k.DOT_MANY[0],
    )


class DecodeState:
    """One fused decoder node's one-token state: its constant weights as planned and,
    after its first one-token run, make()'s gathered groups and buffers (False: the
    weights can't take the fast path)."""

    __slots__ = ("__weakref__", "made", "weights")

    def __init__(self, weights: tuple[Any, ...]) -> None:
        self.weights = weights
        self.made: Any = None

    def serves(self, groups: tuple[tuple[Any, ...], ...]) -> bool:
        """Whether `groups` are the planned weights (identity; runs every token, so a
        plain loop: a generator here cost ~1% of SmolLM2's decode step)."""
        ws, k = self.weights, 0
        for g in groups:
            for w in g:
                if k == len(ws) or w is not ws[k]:
                    return False
                k += 1
        return k == len(ws)


def prepare_decode(first: int, count: int) -> Any:
    """A prepare hook (ops/registry.py) keeping inputs first..first+count-1, the
    node's weights, in a DecodeState."""

    def prepare(consts: tuple[Any, ...], attrs: dict) -> DecodeState:
        return DecodeState(tuple(consts[first : first + count]))

    return prepare


def _state(
    state: DecodeState | None, groups: tuple[tuple[Any, ...], ...], mode: str, make: Any
) -> Any:
    """make() for the weight groups `groups`, kept in the node's state when it has one
    for them, or None when a group can't take the fast path."""
    if not isinstance(groups[0][0], QWeight):  # e.g. a float matrix
        return None
    ours = state is not None and state.serves(groups)
    if ours and state is not None and state.made is not None:
        return state.made or None
    ok = all(all_simd(ws, 1, mode) for ws in groups)
    ready()
    made = make() if ok else False
    if ours and state is not None:
        state.made = made
    return made or None


_CTL = control()  # the staged ops' counters: one op runs at a time (_LOCK)
_LOCK = threading.Lock()
_JOB = [0]


def _serial(g: tuple) -> tuple:
    """The group with its products on the calling thread (one chunk, serial twin)."""
    return (*g[:N_CHUNKS], 1, False)


_FORCED: list[str | None] = [None]


@contextlib.contextmanager
def forced_path(path: str) -> Iterator[None]:
    """Run the decode ops on one path whatever the load: "serial" (the calling thread)
    or "staged" (llm_decode_mt's regions, even on one thread: a region run on one
    thread finishes). LLM creation runs both so that neither compiles mid-generation
    when load or the thread count switches between them (issue 21)."""
    _FORCED[0] = path
    try:
        yield
    finally:
        _FORCED[0] = None


def warm_pool() -> None:
    """Have the native pool's own kernels (and numba's team starter) ready now, at LLM
    creation, not at the first op that goes parallel: a higher thread count or less
    load mid-generation then loads nothing (issue 21). Links records or compiles; runs
    nothing. (Here, not in native/parallel.py: the kernels' sources are unchanged.)"""
    from onnxexec.kernels.objload import warm
    from onnxexec.native import parallel as par
    from onnxexec.native.affinity import start_team

    ctrl = np.zeros(par.BOUNDS + par.MAX_SPANS + 1, dtype=np.int64)
    warm(par.serve, ctrl, np.zeros(4, dtype=np.float64), True, par.TIMEOUT)
    warm(par.publish, ctrl, 1, par.KIND_PY, np.arange(2, dtype=np.int64))
    warm(par._spin_while, np.zeros(1, dtype=np.int64), 0, 1)
    warm(par._read_cycles)
    warm(start_team, np.zeros(1, dtype=np.int64))  # numba is in: this module uses it


def _threads(g: tuple) -> int:
    """Threads for an op whose first product is g: numba's count when g is worth
    splitting and no other process holds our cores (ops/contention.py), else 1."""
    if not g[PARALLEL] or _FORCED[0] == "serial":
        return 1
    if _FORCED[0] == "staged":
        return max(2, nb.get_num_threads())
    return nb.get_num_threads() if free_cores() else 1


def _staged(fn: Any, *args: Any) -> np.ndarray:
    """A region kernel of kernels/attn/llm_decode_mt (one parallel region per op) on a new
    job: args = (*fn's leading arguments, threads, group 1, group 2); fn gets the
    counters and job number before the thread count, and the groups flat."""
    with _LOCK:
        _JOB[0] += 1
        job = _JOB[0] & ((1 << 40) - 1)
        post(_CTL, job)
        *head, nt, g1, g2 = args
        return fn(*head, _CTL, job, nt, *g1, *g2)


def _f32(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float32 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float32)


def attn_decode(
    x: np.ndarray,
    norm_w: np.ndarray,
    wq: Any,
    wk: Any,
    wv: Any,
    wo: Any,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    p: int,
    attrs: tuple,
    state: DecodeState | None = None,
) -> np.ndarray | None:
    """AttnBlock for one token at position p (caches f16-rounded, 'norm' or 'neox'
    RoPE, p < cache size); attrs = (mode, epsilon, head_dim, n_dims, base, freq_scale,
    neox, q_scale, scale, window, softcap) as the op's attributes."""
    if not (k_cache.flags.c_contiguous and v_cache.flags.c_contiguous):
        return None

    def make() -> tuple:
        _, eps, head_dim, n_dims, base, freq_scale, neox, q_scale, scale, window, softcap = attrs
        cfg = (
            float(eps),
            int(head_dim),
            int(n_dims or head_dim),
            float(base),
            float(freq_scale),
            bool(neox),
            float(q_scale),
            float(scale or 1.0 / math.sqrt(head_dim)),
            int(window),
            float(softcap),
            PAR_MIN_ATTN,
        )
        width = wq.shape[0]
        qkv = group((wq, wk, wv))
        qr, a = np.empty(width, np.float32), np.empty((1, width), np.float32)
        return cfg, qkv, group((wo,)), qr, a

    st = _state(state, ((wq, wk, wv), (wo,)), attrs[0], make)
    if st is None:
        return None
    cfg, gqkv, go, qr, a = st
    nt = _threads(gqkv)
    if nt > 1:
        return _staged(attn_region, _f32(x), norm_w, k_cache, v_cache, p, cfg, qr, a, nt, gqkv, go)
    if gqkv[PARALLEL]:  # one thread: attention on this thread too (par_min)
        gqkv, go, cfg = _serial(gqkv), _serial(go), (*cfg[:-1], 1 << 62)
    return attn_one(_f32(x), norm_w, k_cache, v_cache, p, cfg, gqkv, go, qr, a)


def ffn_decode(
    x: np.ndarray,
    norm_w: np.ndarray,
    wg: Any,
    wu: Any,
    wd: Any,
    epsilon: float,
    mode: str,
    state: DecodeState | None = None,
) -> np.ndarray | None:
    """FFNBlock with ggml's SwiGLU for one token."""

    def make() -> tuple:
        return float(epsilon), group((wg, wu)), group((wd,)), int(wg.shape[0])

    st = _state(state, ((wg, wu), (wd,)), mode, make)
    if st is None:
        return None
    eps, ggu, gd, f = st
    nt = _threads(ggu)
    if nt > 1:
        return _staged(ffn_region, _f32(x), norm_w, eps, f, nt, ggu, gd)
    if ggu[PARALLEL]:
        ggu, gd = _serial(ggu), _serial(gd)
    return ffn_one(_f32(x), norm_w, eps, ggu, gd, f)


def norm_qmatmul_decode(
    x: np.ndarray,
    norm_w: np.ndarray,
    w: Any,
    epsilon: float,
    mode: str,
    state: DecodeState | None = None,
) -> np.ndarray | None:
    """NormQMatMul for one token (the logits: a new array every call)."""
    st = _state(state, ((w,),), mode, lambda: (float(epsilon), group((w,))))
    if st is None:
        return None
    eps, g = st
    return norm_dot_one(_f32(x), norm_w, eps, g if _threads(g) > 1 else _serial(g))
