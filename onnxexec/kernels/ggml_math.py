"""Element-wise math exactly as ggml's x86 CPU backend computes it (AVX2 + FMA build).

llama.cpp's results depend on how ggml rounds, not only on what it computes; these
kernels reproduce it bit for bit so that onnxexec's logits can match llama.cpp's:
- `expf`: ggml_v_expf (ggml-cpu/vec.h, the AVX2 polynomial: ~1.5 ulp from exp), used
  by the softmax and SiLU.
- `silu_mul`: ggml_vec_swiglu_f32, x / (1 + expf(-x)) * g in float32.
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

from onnxexec.kernels.lanes import twins

PAR_MIN_WORK = 1 << 16  # element operations from which waking the thread pool pays off

_R = np.float32(12582912.0)  # 0x1.8p23: adding it rounds to an integer
_LOG2E = np.float32(float.fromhex("0x1.715476p+0"))
_LN2_HI = np.float32(float.fromhex("0x1.62e4p-1"))
_LN2_LO = np.float32(float.fromhex("0x1.7f7d1cp-20"))
_P0 = np.float32(float.fromhex("0x1.0e4020p-7"))
_P1 = np.float32(float.fromhex("0x1.573e2ep-5"))
_P2 = np.float32(float.fromhex("0x1.555e66p-3"))
_P3 = np.float32(float.fromhex("0x1.fffdb6p-2"))
_P4 = np.float32(float.fromhex("0x1.ffffecp-1"))
_POW2 = np.ldexp(np.float32(1.0), np.arange(-126, 128)).astype(np.float32)  # 2^n, normal
_GELU_A = np.float32(0.044715)
_SQRT_2_OVER_PI = np.float32(0.79788456080286535587989211986876)


@nb.njit(cache=True, nogil=True, inline="always")
def fma32(a, b, c):
    """round_f32(a * b + c) for float32 a, b, c (see the module docstring)."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@nb.njit(cache=True, nogil=True)
def expf(x):
    """ggml_v_expf for one float32 lane: exp(x) = 2^n * (1 + p(b)), n = round(x / ln2)."""
    z = fma32(x, _LOG2E, _R)
    n = np.float32(z - _R)
    b = fma32(-n, _LN2_LO, fma32(-n, _LN2_HI, x))
    u = np.float32(b * b)
    j = fma32(fma32(fma32(_P0, b, _P1), u, fma32(_P2, b, _P3)), u, np.float32(_P4 * b))
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


def _silu_mul(x, g, out):
    """out = x / (1 + expf(-x)) * g over flat float32 arrays (ggml_v_silu, then * g)."""
    for i in nb.prange(x.size):
        v = x[i]
        out[i] = np.float32(v / (np.float32(1.0) + expf(np.float32(0.0) - v))) * g[i]


_SILU_MUL = twins(_silu_mul)


def silu_mul(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """SwiGLU silu(x) * g for same-shape float32 arrays, rounded as ggml."""
    if x.shape != g.shape or x.dtype != np.float32 or g.dtype != np.float32:
        raise ValueError(
            f"silu_mul: expected two float32 arrays of one shape, got "
            f"{x.dtype}{list(x.shape)} and {g.dtype}{list(g.shape)}"
        )
    out = np.empty_like(x)
    kern = _SILU_MUL[0] if x.size >= PAR_MIN_WORK else _SILU_MUL[1]
    kern(np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(g).reshape(-1), out.reshape(-1))
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
def _rope_cache(p0, T, n_dims, base, freq_scale, cos, sin):
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
    _rope_cache(int(p0), int(T), int(n_dims), np.float32(base), np.float32(freq_scale), cos, sin)
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
