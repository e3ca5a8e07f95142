"""The recurrence of com.microsoft DynamicQuantizeLSTM (ops/contrib/quant_rnn.py) in
numba, for the default activations (sigmoid, tanh, tanh).

Per step: the hidden state is quantized to uint8 as DynamicQuantizeLinear does (one
scale over the batch, float32 arithmetic, round half to even), multiplied exactly with
the zero-point-shifted recurrent weight (exact: float32 lanes when H * 255 * max|R|
stays below 2^24, float64 otherwise), scaled
by scale * w_scale[j] in float32 and added to the precomputed input projection; then
the gates i o f c with optional peepholes and clip. `qlstm_reference` in
ops/contrib/quant_rnn.py (the numpy path) is the reference this matches.
"""

from __future__ import annotations

import numba as nb
import numpy as np

f32 = np.float32


@nb.njit(cache=True, nogil=True)
def _sigmoid(v: float) -> float:
    return f32(1.0) / (f32(1.0) + np.exp(-v))


@nb.njit(cache=True, nogil=True)
def _tanh(v: float) -> float:
    # 1 - 2 / (e^2v + 1): numba's exp vectorizes, its tanh (libm tanhf) does not and
    # cost ~40 ns a call here, most of a step; |error| < 2e-7 (tests/unit/ops/
    # test_ms_quant_rnn.py compares with numpy's tanh)
    return f32(1.0) - f32(2.0) / (np.exp(f32(2.0) * v) + f32(1.0))


@nb.njit(cache=True, nogil=True, fastmath=True)
def _matvec(hq, r, acc):  # pragma: no cover - numba
    """acc (B, 4H) = hq (B, H) @ r (H, 4H). Every partial sum is an integer the
    accumulator type holds exactly (see qlstm_recurrence), so any summation order
    (fastmath) gives the same result; k outermost reads r once for all batch rows."""
    batch, hid = hq.shape
    acc[:] = 0
    for k in range(hid):
        rk = r[k]
        for b in range(batch):
            a = hq[b, k]
            if a != 0:
                row = acc[b]
                for j in range(rk.shape[0]):
                    row[j] += a * row.dtype.type(rk[j])


@nb.njit(cache=True, nogil=True)
def _qlstm(xw, lens, r, rs, h, c, p, clip, input_forget, y, acc):  # pragma: no cover
    """xw (T, B, 4H) f32, lens (B,) i64, r (H, 4H) centred weight codes (int16 when
    every sum stays below 2^24 in float32, else float64), rs (4H,) f32, h, c (B, H)
    f32 state (updated), p (3H,) f32 peepholes, clip f32 (inf: none), y (T, B, H)
    f32 out, acc (B, 4H) scratch in the accumulator type (float32 / float64)."""
    t_len, batch, g4 = xw.shape
    hid = g4 // 4
    hq = np.empty((batch, hid), acc.dtype)
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
            for k in range(hid):
                v = h[b, k] if live else f32(0.0)
                q = min(max(np.rint(f32(v / scale)) + zp, f32(0.0)), f32(255.0))
                hq[b, k] = q - zp
        _matvec(hq, r, acc)
        for b in range(batch):
            for j in range(g4):
                gates[j] = xw[t, b, j] + f32(acc[b, j]) * (scale * rs[j])
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


def recurrent_weight(r: np.ndarray, zero_point: int) -> np.ndarray:
    """R (H, 4H) 8-bit codes minus the zero point, contiguous: int16 when every step's
    sum stays below 2^24 (exact in float32 lanes; int16 halves the bytes each step
    streams, which bounds the step's time), else float64 (float64 lanes). Built once
    per weight (DynamicQuantizeLSTM's prepare hook, ops/contrib/quant_rnn.py)."""
    rc = r.astype(np.int32) - np.int32(zero_point)
    exact32 = r.shape[0] * 255.0 * float(np.abs(rc).max(initial=0)) < 2.0**24
    out = np.ascontiguousarray(rc, dtype=np.int16 if exact32 else np.float64)
    out.flags.writeable = False
    return out


def qlstm_recurrence(
    xw: np.ndarray,
    lens: np.ndarray,
    r_centred: np.ndarray,
    r_scale: np.ndarray,
    h0: np.ndarray,
    c0: np.ndarray,
    p: np.ndarray,
    clip: float | None,
    input_forget: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y (T, B, H), h_T (B, H), c_T (B, H)) of one direction; see the module docstring.

    r_centred: recurrent_weight's result (int16 or float64, as made there), or any
    centred codes, which are then converted here on every call."""
    t_len, batch, g4 = xw.shape
    hid = g4 // 4
    assert r_centred.shape == (hid, g4) and r_scale.shape == (g4,) and p.shape == (3 * hid,)
    h = np.ascontiguousarray(h0, np.float32).copy()
    c = np.ascontiguousarray(c0, np.float32).copy()
    y = np.zeros((t_len, batch, hid), np.float32)
    cl = np.float32(np.inf if clip is None else clip)
    # int16 carries recurrent_weight's word that its sums are exact in float32
    if r_centred.dtype in (np.int16, np.float64) and r_centred.flags.c_contiguous:
        rk = r_centred  # already prepared by recurrent_weight
    else:
        rk = recurrent_weight(np.asarray(r_centred, np.int32), 0)
    _qlstm(
        np.ascontiguousarray(xw, np.float32), lens.astype(np.int64),
        rk, r_scale.astype(np.float32),
        h, c, p.astype(np.float32), cl, int(input_forget), y,
        np.empty((batch, g4), np.float32 if rk.dtype == np.int16 else np.float64),
    )  # fmt: skip
    return y, h, c
