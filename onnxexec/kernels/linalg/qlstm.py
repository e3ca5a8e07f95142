"""The recurrence of com.microsoft DynamicQuantizeLSTM (ops/contrib/quant_rnn.py) in
numba, for the default activations (sigmoid, tanh, tanh).

Per step: the hidden state is quantized to uint8 as DynamicQuantizeLinear does (one
scale over the batch, float32 arithmetic, round half to even), multiplied exactly with
the recurrent weight on the integer GEMM's tiles (kernels/linalg/igemm.py: R packed
once, int32 sums, zero points as rank-1 corrections), scaled by scale * w_scale[j]
in float32 and added to the precomputed input projection; then the gates i o f c
with optional peepholes and clip. `recurrence_reference` in ops/contrib/quant_rnn.py
(the numpy path) is the reference this matches.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from onnxexec.kernels.linalg import igemm
from onnxexec.kernels.linalg.igemm import TILE_LOOP

f32 = np.float32


@intrinsic
def _as_f32(typingctx, bits):
    """The float32 whose bits are the int32 `bits` (a bitcast, which vectorizes)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


_ROUND = f32(12582912.0)  # 1.5 * 2^23: (v + it) - it rounds half to even for |v| < 2^22


@nb.njit(cache=True, nogil=True)
def _exp(v: float) -> float:
    """float32 e^v, Cephes expf (2^n e^r, |r| <= ln2 / 2, degree-6 polynomial; about 1
    ulp): numba's np.exp calls libm's expf per element (no SVML here), which does not
    vectorize and was most of a step. v is clamped to [-87, 88] (2^n stays a normal float32)."""
    v = min(max(v, f32(-87.0)), f32(88.0))
    n = (v * f32(1.44269504088896341) + _ROUND) - _ROUND
    r = v - n * f32(0.693359375) - n * f32(-2.12194440e-4)
    p = f32(1.9875691500e-4)
    p = p * r + f32(1.3981999507e-3)
    p = p * r + f32(8.3334519073e-3)
    p = p * r + f32(4.1665795894e-2)
    p = p * r + f32(1.6666665459e-1)
    p = p * r + f32(5.0000001201e-1)
    y = p * r * r + r + f32(1.0)
    return y * _as_f32((np.int32(n) + np.int32(127)) << np.int32(23))


@nb.njit(cache=True, nogil=True)
def _sigmoid(v: float) -> float:
    return f32(1.0) / (f32(1.0) + _exp(-v))


@nb.njit(cache=True, nogil=True)
def _tanh(v: float) -> float:
    # 1 - 2 / (e^2v + 1) through `_exp` (vectorizes, as numba's tanh does not);
    # tests/unit/ops/test_ms_quant_rnn.py compares the steps with numpy's tanh / exp
    return f32(1.0) - f32(2.0) / (_exp(f32(2.0) * v) + f32(1.0))


@nb.njit(cache=True, nogil=True)
def _qlstm(xw, lens, rp, colsum, zw, rs, h, c, p, clip, input_forget, y):  # pragma: no cover
    """xw (T, B, 4H) f32, lens (B,) i64, rp R (H, 4H) packed by igemm.pack, colsum and
    zw (4H,) i64 its column sums and zero point in the packed codes, rs (4H,) f32,
    h, c (B, H) f32 state (updated), p (3H,) f32 peepholes, clip f32 (inf: none),
    y (T, B, H) f32 out."""
    t_len, batch, g4 = xw.shape
    hid = g4 // 4
    lda = (hid + 3) // 4 * 4
    n_tiles = rp.shape[0] // (2 * igemm.PANEL * lda)
    ldc = n_tiles * igemm.PAIR
    hq = np.zeros(batch * lda, np.uint8)  # the pad bytes past H stay 0
    acc = np.empty(batch * ldc, np.int32)
    rsum = np.empty(batch, np.int64)
    gates = np.empty(g4, np.float32)
    for t in range(t_len):
        # rows whose sequence ended feed zeros (onnxruntime reads its zero-filled Y)
        xmax = f32(0.0)
        xmin = f32(0.0)
        for b in range(batch):
            live = t == 0 or t - 1 < lens[b]
            for k in range(hid):
                v = h[b, k] if live else f32(0.0)
                xmax = max(xmax, v)
                xmin = min(xmin, v)
        scale = f32(1.0) if xmax == xmin else f32((xmax - xmin) / f32(255.0))
        zp = np.rint(min(max(f32(0.0) - xmin / scale, f32(0.0)), f32(255.0)))
        for b in range(batch):
            live = t == 0 or t - 1 < lens[b]
            total = 0
            for k in range(hid):
                v = h[b, k] if live else f32(0.0)
                q = min(max(np.rint(f32(v / scale)) + zp, f32(0.0)), f32(255.0))
                hq[b * lda + k] = np.uint8(q)
                total += np.int64(q)
            rsum[b] = total
        TILE_LOOP(hq, lda, batch, lda // 4, rp, acc, ldc, 0, n_tiles)
        za = np.int64(zp)
        for b in range(batch):
            # sum_k (q - za)(r - zw) = sum q r - zw sum q - za sum r + H za zw (exact)
            for j in range(g4):
                s = np.int64(acc[b * ldc + j]) - zw[j] * rsum[b] - za * colsum[j] + hid * za * zw[j]
                gates[j] = xw[t, b, j] + f32(s) * (scale * rs[j])
            if t >= lens[b]:
                for k in range(hid):
                    y[t, b, k] = 0.0
                continue
            # one gate per loop, in place in `gates` (i, o, f, c quarters): branch-free
            # loops over k vectorize, exp included; the arithmetic per element is that
            # of recurrence_reference, in the same order
            for k in range(hid):
                gates[k] = _sigmoid(min(max(gates[k] + p[k] * c[b, k], -clip), clip))
            if input_forget:
                for k in range(hid):
                    gates[2 * hid + k] = f32(1.0) - gates[k]
            else:
                for k in range(2 * hid, 3 * hid):
                    gates[k] = _sigmoid(min(max(gates[k] + p[k] * c[b, k - 2 * hid], -clip), clip))
            for k in range(3 * hid, g4):
                gates[k] = _tanh(min(max(gates[k], -clip), clip))
            for k in range(hid):
                c[b, k] = gates[2 * hid + k] * c[b, k] + gates[k] * gates[3 * hid + k]
            for k in range(hid):
                go = min(max(gates[hid + k] + p[hid + k] * c[b, k], -clip), clip)
                h[b, k] = _sigmoid(go) * _tanh(c[b, k])
                y[t, b, k] = h[b, k]


def recurrent_weight(r: np.ndarray, zero_point: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R (H, 4H) 8-bit codes and their zero point as the recurrence multiplies them:
    (packed bytes, column sums, zero point per column), both in the packed codes.
    Built once per weight (DynamicQuantizeLSTM's prepare hook, ops/contrib/quant_rnn.py)."""
    packed, shift = igemm.pack(r)
    colsum = r.sum(axis=0, dtype=np.int64) - shift * r.shape[0]
    zw = np.full(r.shape[1], zero_point - shift, np.int64)
    return packed, colsum, zw


def qlstm_recurrence(
    xw: np.ndarray,
    lens: np.ndarray,
    r_prepared: tuple[np.ndarray, np.ndarray, np.ndarray],
    r_scale: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray,
    p: np.ndarray,
    clip: float | None,
    input_forget: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y (T, B, H), h_T (B, H), c_T (B, H)) of one direction; see the module docstring.
    r_prepared: `recurrent_weight`'s result."""
    t_len, batch, g4 = xw.shape
    hid = g4 // 4
    rp, colsum, zw = r_prepared
    assert colsum.shape == (g4,) and r_scale.shape == (g4,) and p.shape == (3 * hid,)
    h = np.ascontiguousarray(h0, np.float32).copy()
    c = np.ascontiguousarray(c0, np.float32).copy()
    y = np.zeros((t_len, batch, hid), np.float32)
    cl = np.float32(np.inf if clip is None else clip)
    _qlstm(
        np.ascontiguousarray(xw, np.float32), lens.astype(np.int64), rp, colsum, zw,
        r_scale.astype(np.float32), h, c, p.astype(np.float32), cl, int(input_forget), y,
    )  # fmt: skip
    return y, h, c
