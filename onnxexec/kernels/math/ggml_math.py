"""Element-wise math exactly as ggml's x86 CPU backend computes it (AVX2 + FMA build).

llama.cpp's results depend on how ggml rounds, not only on what it computes; these
kernels reproduce it bit for bit so that onnxexec's logits can match llama.cpp's:
- `expf`: ggml_v_expf (ggml-cpu/vec.h, the AVX2 polynomial: ~1.5 ulp from exp), used
  by the softmax and SiLU.
- `expf_vec`: expf over an array in a vectorizable loop, same bits.
- `silu_mul`: ggml_vec_swiglu_f32, x / (1 + expf(-x)) * g in float32.
- `f16_round`: float32 -> nearest half as float32 (F16C rounding), vectorizable.
- `gelu_f16_table`: ggml_table_gelu_f16 (GGML_GELU_FP16), tanh-GELU of every half.
- `rope_cache` / `rope_rotate`: ggml_rope_cache_init and rotate_pairs: theta starts at
  the position and is multiplied by powf(base, -2/n_dims) once per pair; cos/sin are
  glibc's cosf/sinf (numba's float32 math.cos/sin call them); the rotation is
  compiled with FMA contraction: x0*c - x1*s = fma(x0, c, -(x1*s)),
  x0*s + x1*c = fma(x0, s, x1*c) (checked against llama.cpp's tensors).
A float32 fma is computed in float64 (the product of two float32 is exact there) and
rounded once more to float32; this double rounding differs from a true fma only when
the float64 sum lands exactly on a float32 rounding midpoint (probability ~2^-29).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from onnxexec.kernels import tuning
from onnxexec.kernels.math.lanes import twins
from onnxexec.native.parallel import parallel_for

PAR_MIN_WORK = tuning.GGML_PAR_MIN_WORK

ROUND_MAGIC = np.float32(12582912.0)  # 0x1.8p23: adding it rounds to an integer
LOG2E = np.float32(float.fromhex("0x1.715476p+0"))
LN2_HI = np.float32(float.fromhex("0x1.62e4p-1"))
LN2_LO = np.float32(float.fromhex("0x1.7f7d1cp-20"))
P0 = np.float32(float.fromhex("0x1.0e4020p-7"))
P1 = np.float32(float.fromhex("0x1.573e2ep-5"))
P2 = np.float32(float.fromhex("0x1.555e66p-3"))
P3 = np.float32(float.fromhex("0x1.fffdb6p-2"))
P4 = np.float32(float.fromhex("0x1.ffffecp-1"))
_POW2 = np.ldexp(np.float32(1.0), np.arange(-126, 128)).astype(np.float32)  # 2^n, normal
_F16_MASK = np.uint32(0xFFFFE000)  # float32 mantissa bits a half keeps
_F16_MIN_NORMAL = 0x38800000  # float32 bits of 2^-14
_F32_INF = 0x7F800000
_TWO_24 = np.float32(2.0**24)
_TWO_M24 = np.float32(2.0**-24)
_GELU_A = np.float32(0.044715)
_SQRT_2_OVER_PI = np.float32(0.79788456080286535587989211986876)


@nb.njit(cache=True, nogil=True, inline="always")
def fma32(a, b, c):
    """round_f32(a * b + c) for float32 a, b, c (see the module docstring)."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@nb.njit(cache=True, nogil=True)
def expf(x):
    """ggml_v_expf for one float32 lane: exp(x) = 2^n * (1 + p(b)), n = round(x / ln2)."""
    z = fma32(x, LOG2E, ROUND_MAGIC)
    n = np.float32(z - ROUND_MAGIC)
    b = fma32(-n, LN2_LO, fma32(-n, LN2_HI, x))
    u = np.float32(b * b)
    j = fma32(fma32(fma32(P0, b, P1), u, fma32(P2, b, P3)), u, np.float32(P4 * b))
    an = abs(n)
    if an > np.float32(126.0):  # 2^n is not a normal float32: scale in two steps
        if an > np.float32(192.0):
            return np.float32(0.0) if n <= 0 else np.float32(np.inf)
        if n <= 0:
            s2 = np.float32(math.ldexp(1.0, int(n) + 125))
            return np.float32(fma32(s2, j, s2) * np.float32(2.0**-125))
        s2 = np.float32(math.ldexp(1.0, int(n) - 127))
        return np.float32(fma32(s2, j, s2) * np.float32(2.0**127))
    k = _POW2[int(n) + 126]
    return fma32(j, k, k)


@nb.njit(cache=True, nogil=True)
def expf_vec(x, out):
    """out[i] = expf(x[i]) bit for bit over 1-D float32 arrays, in a loop the compiler
    vectorizes: the common case (-125 <= n <= 126) for every element branch-free, then
    the others again through expf.

    Two of expf's fused multiply-adds are plain float32 operations here, with equal
    results: n * LN2_HI is exact in float32 (15-bit constant, |n| <= 2^9), and
    fma(j, 2^n, 2^n) = 2^n * round(1 + j) while the result is a normal float32 (n >=
    -125); a sum of two float32 rounded to float64 and then float32 is correctly rounded
    (53 >= 2 * 24 + 2), so fma32 gave the float32 sum too.
    """
    special = 0
    for i in range(x.shape[0]):
        xi = x[i]
        z = fma32(xi, LOG2E, ROUND_MAGIC)
        n = np.float32(z - ROUND_MAGIC)
        b = fma32(-n, LN2_LO, np.float32(np.float32(-n * LN2_HI) + xi))
        u = np.float32(b * b)
        j = fma32(fma32(fma32(P0, b, P1), u, fma32(P2, b, P3)), u, np.float32(P4 * b))
        ok = n >= np.float32(-125.0) and n <= np.float32(126.0)  # False for NaN too
        e = np.int32(n) if ok else np.int32(0)
        k = np.uint32(np.uint32(e + 127) << np.uint32(23)).view(np.float32)  # 2^n
        out[i] = np.float32(np.float32(j + np.float32(1.0)) * k)
        special |= 0 if ok else 1
    if special:
        for i in range(x.shape[0]):
            n = np.float32(fma32(x[i], LOG2E, ROUND_MAGIC) - ROUND_MAGIC)
            if not (n >= np.float32(-125.0) and n <= np.float32(126.0)):
                out[i] = expf(x[i])


_SILU_BLOCK = tuning.GGML_SILU_BLOCK  # elements per work item: a few L1-sized scratch rows


@nb.njit(cache=True, nogil=True)
def _silu_mul_blocks(x, g, out, b0, b1):
    """out = x / (1 + expf(-x)) * g over flat float32 arrays (ggml_v_silu, then * g) for
    blocks [b0, b1) of _SILU_BLOCK elements, expf vectorized (expf_vec)."""
    n = x.size
    neg = np.empty(_SILU_BLOCK, np.float32)
    e = np.empty(_SILU_BLOCK, np.float32)
    for blk in range(b0, b1):
        i0 = blk * _SILU_BLOCK
        m = min(n, i0 + _SILU_BLOCK) - i0
        xb = x[i0 : i0 + m]
        for i in range(m):
            neg[i] = np.float32(0.0) - xb[i]
        expf_vec(neg[:m], e[:m])
        gb = g[i0 : i0 + m]
        ob = out[i0 : i0 + m]
        for i in range(m):
            ob[i] = np.float32(xb[i] / (np.float32(1.0) + e[i])) * gb[i]


@nb.njit(cache=True, nogil=True, inline="always")
def f16_round(x):
    """fp16.round_to_f16 bit for bit (+0 for -0 included), in integer and select
    operations only, so that loops over it vectorize: round-to-nearest-even of the 13
    dropped mantissa bits, or of the 2^-24 multiples below the smallest normal half."""
    a = np.uint32(np.float32(x).view(np.uint32) & np.uint32(0x7FFFFFFF))
    b = np.uint32((a + np.uint32(0xFFF) + ((a >> np.uint32(13)) & np.uint32(1))) & _F16_MASK)
    r = np.uint32(b).view(np.float32)
    r = np.float32(np.inf) if r > np.float32(65504.0) else r
    sub = np.float32(np.rint(np.uint32(a).view(np.float32) * _TWO_24) * _TWO_M24)
    r = sub if a < np.uint32(_F16_MIN_NORMAL) else r
    r = -r if x < 0 else r
    return x if a >= np.uint32(_F32_INF) else r


def silu_mul(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """SwiGLU silu(x) * g for same-shape float32 arrays, rounded as ggml."""
    if x.shape != g.shape or x.dtype != np.float32 or g.dtype != np.float32:
        raise ValueError(
            f"silu_mul: expected two float32 arrays of one shape, got "
            f"{x.dtype}{list(x.shape)} and {g.dtype}{list(g.shape)}"
        )
    out = np.empty_like(x)
    xf = np.ascontiguousarray(x).reshape(-1)
    gf = np.ascontiguousarray(g).reshape(-1)
    of = out.reshape(-1)
    n_blocks = -(-x.size // _SILU_BLOCK)

    def blocks(b0: int, b1: int) -> None:
        _silu_mul_blocks(xf, gf, of, b0, b1)

    if x.size >= PAR_MIN_WORK:  # native/parallel.py: no waiting for late workers
        parallel_for(blocks, n_blocks)
    else:
        blocks(0, n_blocks)
    return out


@nb.njit(cache=True, nogil=True)
def _gelu_table(x, out):
    """ggml_gelu_f32 as compiled (contracted): 0.5x * (1 + tanhf(sx * fma(ax, x, 1)))."""
    for i in range(x.size):
        v = x[i]
        inner = np.float32(_SQRT_2_OVER_PI * v) * fma32(np.float32(_GELU_A * v), v, np.float32(1.0))
        out[i] = np.float32(np.float32(0.5) * v) * np.float32(
            np.float32(1.0) + math.tanh(np.float32(inner))
        )


_TABLE: list[np.ndarray] = []


def gelu_f16_table() -> np.ndarray:
    """(65536,) float32: GELU of the half with bit pattern i, rounded to half."""
    if not _TABLE:
        x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
        g = np.empty_like(x)
        with np.errstate(all="ignore"):
            _gelu_table(x, g)
        _TABLE.append(g.astype(np.float16).astype(np.float32))
    return _TABLE[0]


@nb.njit(cache=True, nogil=True)
def rope_cache_fill(p0, T, n_dims, base, freq_scale, cos, sin):
    theta_scale = np.float32(base) ** np.float32(np.float32(-2.0) / np.float32(n_dims))
    for t in range(T):
        theta = np.float32(p0 + t)
        for i in range(n_dims // 2):
            th = np.float32(freq_scale * theta)
            cos[t, i] = math.cos(th)
            sin[t, i] = math.sin(th)
            theta = np.float32(theta * theta_scale)


def rope_cache(
    p0: int, T: int, n_dims: int, base: float, freq_scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin (T, n_dims/2) float32 for positions p0..p0+T-1, as ggml_rope_cache_init."""
    cos = np.empty((T, n_dims // 2), np.float32)
    sin = np.empty_like(cos)
    rope_cache_fill(
        int(p0), int(T), int(n_dims), np.float32(base), np.float32(freq_scale), cos, sin
    )
    return cos, sin


def _rope_rotate(x, cos, sin, head_dim, n_dims, neox, out):
    T, W = x.shape
    H = W // head_dim
    half = n_dims // 2
    for th in nb.prange(T * H):
        t = th // H
        o = (th % H) * head_dim
        for d in range(n_dims, head_dim):
            out[t, o + d] = x[t, o + d]
        for i in range(half):
            a = o + i if neox else o + 2 * i
            b = a + half if neox else a + 1
            c = cos[t, i]
            s = sin[t, i]
            x0 = x[t, a]
            x1 = x[t, b]
            out[t, a] = fma32(x0, c, -np.float32(x1 * s))
            out[t, b] = fma32(x0, s, np.float32(x1 * c))


_ROPE_ROTATE = twins(_rope_rotate)


def rope_rotate(
    x: np.ndarray, cos: np.ndarray, sin: np.ndarray, head_dim: int, n_dims: int, neox: bool
) -> np.ndarray:
    """Rotate each head of x (T, H*head_dim) f32: pairs (2i, 2i+1), or (i, i+n/2) if neox."""
    out = np.empty_like(x)
    kern = _ROPE_ROTATE[0] if x.size >= PAR_MIN_WORK else _ROPE_ROTATE[1]
    kern(
        np.ascontiguousarray(x, dtype=np.float32),
        cos,
        sin,
        int(head_dim),
        int(n_dims),
        bool(neox),
        out,
    )
    return out


@nb.njit(cache=True, nogil=True)
def _softcap(x, cap, out):
    inv = np.float32(np.float32(1.0) / cap)
    for i in range(x.size):
        out[i] = np.float32(cap * math.tanh(np.float32(x[i] * inv)))


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    """cap * tanhf(x * (1/cap)) in float32: ggml_scale, ggml_tanh (glibc tanhf), ggml_scale."""
    out = np.empty(x.shape, np.float32)
    _softcap(
        np.ascontiguousarray(x, dtype=np.float32).reshape(-1), np.float32(cap), out.reshape(-1)
    )
    return out


def _rms_norm(x, w, eps, group, out):
    """x (R, W) f32 -> out: each `group`-wide slice of a row scaled by 1/sqrt(mean sq + eps)
    and multiplied by w (group,), as ggml_compute_forward_rms_norm_f32 (+ ggml_mul)."""
    R, W = x.shape
    n_groups = W // group
    for rg in nb.prange(R * n_groups):
        r = rg // n_groups
        o = (rg % n_groups) * group
        total = 0.0
        for i in range(group):
            v = x[r, o + i]
            total += np.float64(np.float32(v * v))
        mean = np.float32(total / group)
        scale = np.float32(1.0) / np.float32(math.sqrt(np.float32(mean + eps)))
        for i in range(group):
            out[r, o + i] = np.float32(x[r, o + i] * scale) * w[i]


_RMS_NORM = twins(_rms_norm)


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float, group: int = 0) -> np.ndarray:
    """RMSNorm over the last axis (or each `group`-wide slice of it) of float32 x."""
    width = x.shape[-1]
    group = group or width
    if width % group or w.shape != (group,):
        raise ValueError(
            f"rms_norm: width {width}, group {group} and weight shape {w.shape} do not fit"
        )
    x2 = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, width)
    out = np.empty_like(x2)
    kern = _RMS_NORM[0] if x2.size >= PAR_MIN_WORK else _RMS_NORM[1]
    kern(x2, np.ascontiguousarray(w, dtype=np.float32), np.float32(eps), int(group), out)
    return out.reshape(x.shape)


def ready_twins() -> None:
    """Run both copies of rope_rotate and rms_norm once on tiny arrays of the types
    their callers pass. The parallel copies serve T x width >= PAR_MIN_WORK (a 114-token
    prompt of a 576-wide model), which the short runs of LLM creation (llm/model.py)
    do not reach; without this, the first long prompt compiles one mid-generation."""
    x = np.zeros((1, 2), np.float32)
    half = np.zeros((1, 1), np.float32)
    for kern in _ROPE_ROTATE:
        kern(x, half, half, 2, 2, False, np.empty_like(x))
    for kern in _RMS_NORM:
        kern(x, np.ones(2, np.float32), np.float32(1e-6), 2, np.empty_like(x))
