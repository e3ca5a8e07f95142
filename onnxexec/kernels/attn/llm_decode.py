"""One compiled call per fused decoder op for one new token (T = 1).

A decoder layer's one-token work is ~10 kernel calls (norm + quantize, the Q|K|V
product, RoPE + cache write, attention, quantize, the output product, the residual;
the same for the FFN). Called from Python, each paid numba's argument typing (~3-5 us,
most of it for tuples of arrays) and the Python around it: ~1.5 ms of an ~11 ms
SmolLM2 token. The drivers here make the same calls, in the same order, with the same
argument types, from compiled code: one dispatch per op. A parallel kernel called from
them still runs its prange on numba's thread pool.

A weight group's cached arguments and buffers (ops/llm_decode.py builds them once) are
one flat tuple, indexed by the constants below:

    (in, x8, xst, xk8, xkd, xkbs, out, raws, row_bytes, kinds, col0s, block, kq, rows4,
     n_chunks, parallel)

in: the group's float input (1, K); x8 .. xkbs: its quantized activations (see
llm_fused.quant_into); out (1, sum N): the products; the rest: ggml_simd_k._dot_many's
arguments and which of its twins to run.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Final

import numba as nb
import numpy as np

from onnxexec.kernels.attn.attention import ggml_n_kv
from onnxexec.kernels.attn.llm_fused import (
    ATTEND_ONE,
    norm_quant_into,
    quant_into,
    rope_store_one,
    swiglu_quant_into,
)
from onnxexec.kernels.quant.ggml_simd_k import DOT_MANY

IN, X8, XST, XK8, XKD, XKBS, OUT = 0, 1, 2, 3, 4, 5, 6
RAWS, ROW_BYTES, KINDS, COL0S, BLOCK, KQ, ROWS4, N_CHUNKS, PARALLEL = range(7, 16)

_DOT_PAR, _DOT_SER = DOT_MANY
_ATTEND_PAR, _ATTEND_SER = ATTEND_ONE
n_kv_jit = nb.njit(nogil=True)(ggml_n_kv)  # compiled into the drivers (cached with them)


@nb.njit(cache=True, nogil=True)
def quant_row_q8(x, g):
    """g's activations <- quantized x (1, K)."""
    quant_into(x, g[BLOCK], g[KQ], g[X8], g[XST], g[XK8], g[XKD], g[XKBS])


@nb.njit(cache=True, nogil=True)
def norm_quant(x, norm_w, eps, g):
    """g's input <- RMSNorm(x) * norm_w, and its activations <- that, quantized."""
    norm_quant_into(
        x, norm_w, np.float32(eps), g[IN], g[BLOCK], g[KQ], g[X8], g[XST], g[XK8], g[XKD], g[XKBS]
    )


@nb.njit(cache=True, nogil=True)
def _products(g, out):
    """out (1, sum N) <- the group's weights times its quantized activations."""
    w = (g[RAWS], g[ROW_BYTES], g[KINDS], g[COL0S])
    args = (*w, g[X8], g[XST], g[XK8], g[XKD], g[XKBS], g[ROWS4], out, g[N_CHUNKS])
    if g[PARALLEL]:
        _DOT_PAR(*args)
    else:
        _DOT_SER(*args)


@nb.njit(cache=True, nogil=True)
def add_residual(x, y):
    """x + y, a new (1, D) float32 array (the op's output: never a reused buffer)."""
    out = np.empty((1, x.shape[1]), np.float32)
    for i in range(x.shape[1]):
        out[0, i] = x[0, i] + y[0, i]
    return out


@nb.njit(cache=True, nogil=True)
def attn_one(x, norm_w, k_cache, v_cache, pos, cfg, gqkv, go, qr, a):
    """AttnBlock for one token at `pos`: x (1, D) -> x + Wo . attention (1, D), the k/v
    rows written into the caches. cfg = (epsilon, head_dim, n_dims, base, freq_scale,
    neox, q_scale, scale, window, softcap, par_min); qr (H*Dh,) and a (1, H*Dh) are
    the rotated queries and the attention output (buffers)."""
    eps, head_dim, n_dims, base, freq_scale, neox, q_scale, scale, window, softcap, par_min = cfg
    norm_quant(x, norm_w, eps, gqkv)
    qkv = gqkv[OUT]
    _products(gqkv, qkv)
    offs = gqkv[COL0S]
    rope_store_one(
        qkv,
        offs[0],
        offs[1],
        offs[2],
        k_cache,
        v_cache,
        pos,
        head_dim,
        n_dims,
        np.float32(base),
        np.float32(freq_scale),
        neox,
        qr,
    )
    span = pos + 1 if not window else min(window, pos + 1)
    n_kv = n_kv_jit(pos, 1, k_cache.shape[0])
    if qr.shape[0] * span >= par_min:
        _ATTEND_PAR(
            qr,
            k_cache,
            v_cache,
            pos,
            np.float32(q_scale),
            np.float32(scale),
            window,
            np.float32(softcap),
            n_kv,
            a,
        )
    else:
        _ATTEND_SER(
            qr,
            k_cache,
            v_cache,
            pos,
            np.float32(q_scale),
            np.float32(scale),
            window,
            np.float32(softcap),
            n_kv,
            a,
        )
    quant_row_q8(a, go)
    _products(go, go[OUT])
    return add_residual(x, go[OUT])


@nb.njit(cache=True, nogil=True)
def ffn_one(x, norm_w, eps, ggu, gd, f):
    """FFNBlock (SwiGLU, ggml rounding) for one token: x (1, D) -> x + Wd . (silu(Wg . h)
    * (Wu . h)); ggu's products are gate | up, f columns each."""
    norm_quant(x, norm_w, eps, ggu)
    y = ggu[OUT]
    _products(ggu, y)
    swiglu_quant_into(
        y[:, :f], y[:, f:], gd[IN], gd[BLOCK], gd[KQ], gd[X8], gd[XST], gd[XK8], gd[XKD], gd[XKBS]
    )
    _products(gd, gd[OUT])
    return add_residual(x, gd[OUT])


@nb.njit(cache=True, nogil=True)
def norm_dot_one(x, norm_w, eps, g):
    """NormQMatMul for one token: W . RMSNorm(x), a new (1, N) array."""
    norm_quant(x, norm_w, eps, g)
    out = np.empty((1, g[OUT].shape[1]), np.float32)
    _products(g, out)
    return out


def ready() -> None:
    """Start numba's thread pool. Call before the first driver call: loaded from the
    on-disk cache, a driver's parallel regions run on the pool without starting it
    (a parallel dispatcher called from Python starts it; one compiled into a serial
    caller does not), and a pool never started crashes the process."""
    nb.get_num_threads()


_KERNELS: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORT = re.compile(r"^\s*from onnxexec\.(kernels|native)((?:\.\w+)*) import (\([^)]*\)|.*)", re.M)


def _source_path(here: str, name: str) -> str:
    """kernels/<name>.py; `native.x` is onnxexec/native/x.py (the pool: its loops are
    compiled into the kernels that call them)."""
    parts = name.split(".")
    if parts[0] == "native":
        return os.path.join(os.path.dirname(here), *parts) + ".py"
    return os.path.join(here, *parts) + ".py"


def kernel_sources_hash(module: str = "attn.llm_decode", here: str = _KERNELS) -> bytes:
    """sha256 of the source of kernels/<module>.py (module dotted below kernels) and of
    every module it imports, directly or not, from onnxexec.kernels[.x] or
    onnxexec.native[.x] (`from onnxexec.kernels.sub import a` imports module sub.a
    when sub is a folder)."""
    h = hashlib.sha256()
    todo, seen = [module], set()
    while todo:
        name = todo.pop()
        path = _source_path(here, name)
        if name in seen or not os.path.exists(path):
            continue
        seen.add(name)
        with open(path, "rb") as f:
            src = f.read()
        h.update(name.encode() + b"\0" + src)
        for top, sub, names in _IMPORT.findall(src.decode()):
            pkg = (sub.lstrip(".") if top == "kernels" else "native" + sub).lstrip(".")
            if pkg and not os.path.isdir(_source_path(here, pkg)[: -len(".py")]):
                todo.append(pkg)
                continue
            # "from onnxexec.kernels[.sub] import a, b as c" imports the modules a and b
            mods = [m.split()[0] for m in names.strip("()").split(",") if m.strip()]
            todo += [f"{pkg}.{m}" if pkg else m for m in mods]
    return h.digest()


def stamp_with_kernel_sources(*dispatchers: Any, module: str = "attn.llm_decode") -> None:
    """numba's on-disk cache checks the source of a function's own module only, but
    the code it stores for these drivers includes the kernels they call from other
    modules: stamp their cache entries with those modules' sources too, so that
    editing one recompiles the drivers instead of loading stale code."""
    stamp = kernel_sources_hash(module)
    for d in dispatchers:
        cache_file = getattr(getattr(d, "_cache", None), "_cache_file", None)
        if cache_file is not None and hasattr(cache_file, "_source_stamp"):
            cache_file._source_stamp = (cache_file._source_stamp, stamp)


stamp_with_kernel_sources(
    quant_row_q8, norm_quant, _products, add_residual, attn_one, ffn_one, norm_dot_one
)
