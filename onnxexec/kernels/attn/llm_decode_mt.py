"""The one-token decoder ops of llm_decode.py as ONE parallel region each.

llm_decode.attn_one runs three parallel regions (the Q|K|V product, attention, the
output product) and ffn_one two: five fork/joins of numba's OpenMP pool per layer,
150 per SmolLM2 token, each a wake-up of the pool and a join that waits for the
slowest thread.

Here one prange(n_threads) region runs the op's whole stage list; every stage is
cut into chunks that threads take from shared counters (ctl), and a thread moves
to the next stage once every chunk of this one is done:

    attention: norm+quantize | Q|K|V rows | RoPE + cache write | heads (one chunk per
               KV head) | quantize | output rows
    FFN:       norm+quantize | gate|up rows | SwiGLU + quantize | down rows

A thread only waits for chunks another thread has taken and is running, never for
a thread that has not started: the first thread in runs every stage it finds
untaken, and a late one finds nothing left (even a region run on one thread
finishes). The waits spin on an atomic load (no PAUSE, which traps to the
hypervisor on this VM). The claim words carry the job number, so a thread still
inside an older job can't take a chunk of a newer one. Every chunk computes what
llm_decode's kernels compute for the same rows or heads, with the same chunking:
the bits do not depend on which thread ran a chunk.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from onnxexec.kernels.attn.attend_one import attend_heads, attend_scratch
from onnxexec.kernels.attn.llm_decode import (
    BLOCK,
    COL0S,
    IN,
    KINDS,
    KQ,
    N_CHUNKS,
    OUT,
    RAWS,
    ROW_BYTES,
    ROWS4,
    X8,
    XK8,
    XKBS,
    XKD,
    XST,
    add_residual,
    n_kv_jit,
    norm_quant,
    quant_row_q8,
    stamp_with_kernel_sources,
)
from onnxexec.kernels.attn.llm_fused import rope_store_one, swiglu_quant_into
from onnxexec.kernels.intrinsics import atomic_add, atomic_cas, atomic_load, atomic_store
from onnxexec.kernels.quant.ggml_simd import COLS
from onnxexec.kernels.quant.ggml_simd_k import dot_chunk, row_groups

_LINE = 8  # int64 slots per stage: each stage's counters on a cache line of their own
JOB = 0  # ctl[JOB]: the job number posted last
_TAG = 20  # claim word: job << _TAG | next chunk
_MASK = (1 << _TAG) - 1
N_STAGES = 6


def control() -> np.ndarray:
    """The counters of one job at a time (post() resets them): the job number, then
    per stage s the claim word (slot 8(s + 1)) and the chunks done (slot 8(s + 1) + 1)."""
    return np.zeros((N_STAGES + 1) * _LINE, np.int64)


@nb.njit(cache=True, nogil=True)
def post(ctl, job):
    """Reset the stage counters for job number `job` and publish it. Only between jobs
    (every chunk taken of the previous one is done)."""
    for s in range(N_STAGES):
        atomic_store(ctl, (s + 1) * _LINE + 1, 0)
        atomic_store(ctl, (s + 1) * _LINE, job << _TAG)
    atomic_store(ctl, JOB, job)


@nb.njit(cache=True, nogil=True, inline="always")
def _take(ctl, s, job, n):
    """Chunk number of stage s of job `job` for this thread, or -1: none left, or the
    job is no longer the posted one (a helper that woke late)."""
    i = (s + 1) * _LINE
    while True:
        c = atomic_load(ctl, i)
        if c >> _TAG != job or (c & _MASK) >= n:
            return -1
        if atomic_cas(ctl, i, c, c + 1):
            return c & _MASK


@nb.njit(cache=True, nogil=True, inline="always")
def _done(ctl, s):
    atomic_add(ctl, (s + 1) * _LINE + 1, 1)


@nb.njit(cache=True, nogil=True, inline="always")
def _wait(ctl, s, n, job):
    """Until all n chunks of stage s are done (only taken chunks are outstanding);
    False when the job is no longer the posted one."""
    i = (s + 1) * _LINE
    while atomic_load(ctl, i + 1) < n:
        if atomic_load(ctl, i) >> _TAG != job:
            return False
    return atomic_load(ctl, i) >> _TAG == job


@nb.njit(cache=True, nogil=True, inline="always")
def _groups(g):
    """(row groups of g's weights, chunk count) as ggml_simd_k._dot_many cuts them."""
    gs = row_groups(g[RAWS], g[ROW_BYTES])
    return gs, max(1, min(gs[len(g[RAWS])], g[N_CHUNKS]))


@nb.njit(cache=True, nogil=True)
def _dot_chunk(g, gs, n_chunks, c, out):
    """Chunk c of ggml_simd_k._dot_many(g's weights and activations, out)."""
    dot_chunk(g[RAWS], g[ROW_BYTES], g[KINDS], g[COL0S], g[X8], g[XST], g[XK8], g[XKD],
              g[XKBS], g[ROWS4], out, gs, n_chunks, c, COLS)  # fmt: skip


@nb.njit(cache=True, nogil=True, inline="always")
def _products(ctl, s, job, g, out):
    """Stage s: out <- g's products, chunk by chunk; whether the job is still posted."""
    gs, n = _groups(g)
    while True:
        c = _take(ctl, s, job, n)
        if c < 0:
            break
        _dot_chunk(g, gs, n, c, out)
        _done(ctl, s)
    return _wait(ctl, s, n, job)


@nb.njit(cache=True, nogil=True, inline="always")
def _single(ctl, s, job):
    """Whether this thread takes stage s's one chunk."""
    return _take(ctl, s, job, 1) == 0


@nb.njit(cache=True, nogil=True)
def attn_stages(x, norm_w, k_cache, v_cache, pos, cfg, gqkv, go, qr, a, ctl, job, lead):
    """llm_decode.attn_one as the stages of job `job` (module docstring), run by the
    lead thread (which returns the op's output) and any helper (which returns x)."""
    eps, head_dim, n_dims, base, freq_scale, neox, q_scale, scale, window, softcap, _ = cfg
    qkv = gqkv[OUT]
    offs = gqkv[COL0S]
    _, Hkv, Dh = k_cache.shape
    group = qr.shape[0] // Dh // Hkv
    if _single(ctl, 0, job):
        norm_quant(x, norm_w, eps, gqkv)
        _done(ctl, 0)
    if not (_wait(ctl, 0, 1, job) and _products(ctl, 1, job, gqkv, qkv)):
        return x
    if _single(ctl, 2, job):
        rope_store_one(qkv, offs[0], offs[1], offs[2], k_cache, v_cache, pos, head_dim,
                       n_dims, np.float32(base), np.float32(freq_scale), neox, qr)  # fmt: skip
        _done(ctl, 2)
    if not _wait(ctl, 2, 1, job):
        return x
    n_kv = n_kv_jit(pos, 1, k_cache.shape[0])
    lo, qv, s, e, acc = attend_scratch(qr, k_cache, pos, window)  # per thread: heads' own rows
    while True:  # one chunk per KV head: its key rows are read once for its group
        c = _take(ctl, 3, job, Hkv)
        if c < 0:
            break
        attend_heads(qr, k_cache, v_cache, pos, lo, np.float32(q_scale), np.float32(scale),
                      np.float32(softcap), n_kv & ~31, c * group, (c + 1) * group, qv, s, e,
                      acc, a)  # fmt: skip
        _done(ctl, 3)
    if not _wait(ctl, 3, Hkv, job):
        return x
    if _single(ctl, 4, job):
        quant_row_q8(a, go)
        _done(ctl, 4)
    if not (_wait(ctl, 4, 1, job) and _products(ctl, 5, job, go, go[OUT])) or not lead:
        return x
    return add_residual(x, go[OUT])


@nb.njit(cache=True, nogil=True)
def ffn_stages(x, norm_w, eps, ggu, gd, f, ctl, job, lead):
    """llm_decode.ffn_one as the stages of job `job` (see attn_stages)."""
    y = ggu[OUT]
    if _single(ctl, 0, job):
        norm_quant(x, norm_w, eps, ggu)
        _done(ctl, 0)
    if not (_wait(ctl, 0, 1, job) and _products(ctl, 1, job, ggu, y)):
        return x
    if _single(ctl, 2, job):
        swiglu_quant_into(y[:, :f], y[:, f:], gd[IN], gd[BLOCK], gd[KQ], gd[X8], gd[XST],
                          gd[XK8], gd[XKD], gd[XKBS])  # fmt: skip
        _done(ctl, 2)
    if not (_wait(ctl, 2, 1, job) and _products(ctl, 3, job, gd, gd[OUT])) or not lead:
        return x
    return add_residual(x, gd[OUT])


# The same stages as ONE numba parallel region per op (prange over the threads): a
# parfor's captured variables can't be nested tuples, so each group comes in flat.
@nb.njit(parallel=True, cache=True, nogil=True)
def ffn_region(x, norm_w, eps, f, ctl, job, nt,
               a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
               b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15):  # fmt: skip
    """ffn_stages on nt threads of numba's pool: x + the FFN's output."""
    for _t in nb.prange(nt):
        ggu = (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)
        gd = (b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15)
        ffn_stages(x, norm_w, eps, ggu, gd, f, ctl, job, False)
    return add_residual(x, b6)


@nb.njit(parallel=True, cache=True, nogil=True)
def attn_region(x, norm_w, k_cache, v_cache, pos, cfg, qr, a, ctl, job, nt,
                a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
                b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15):  # fmt: skip
    """attn_stages on nt threads of numba's pool: x + the attention block's output."""
    for _t in nb.prange(nt):
        gqkv = (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)
        go = (b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15)
        attn_stages(x, norm_w, k_cache, v_cache, pos, cfg, gqkv, go, qr, a, ctl, job, False)
    return add_residual(x, b6)


stamp_with_kernel_sources(
    attn_stages, ffn_stages, _dot_chunk, post, ffn_region, attn_region, module="attn.llm_decode_mt"
)
