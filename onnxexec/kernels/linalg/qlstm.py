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
def _qlstm(xw, lens, r, rs, h, c, p, clip, input_forget, y):  # pragma: no cover - numba
    """xw (T, B, 4H) f32, lens (B,) i64, r (H, 4H) centred weight codes in the accumulator
    type (float32 when every sum stays below 2^24, else float64), rs (4H,) f32,
    h, c (B, H) f32 state (updated), p (3H,) f32 peepholes, clip f32 (inf: none),
    y (T, B, H) f32 out."""
    t_len, batch, g4 = xw.shape
    hid = g4 // 4
    hq = np.empty((batch, hid), r.dtype)
    acc = np.empty(g4, r.dtype)
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
        for b in range(batch):
            # acc += a * r[k, :] row by row: independent lanes, so it vectorizes
            # without reassociating a sum (integers, exact in acc's type)
            acc[:] = 0
            for k in range(hid):
                a = hq[b, k]
                if a != 0:
                    for j in range(g4):
                        acc[j] += a * r[k, j]
            for j in range(g4):
                gates[j] = xw[t, b, j] + f32(acc[j]) * (scale * rs[j])
            if t >= lens[b]:
                for k in range(hid):
                    y[t, b, k] = 0.0
                continue
            for k in range(hid):
                cp = c[b, k]
                gi = min(max(gates[k] + p[k] * cp, -clip), clip)
                i = _sigmoid(gi)
                if input_forget:
                    fg = f32(1.0) - i
                else:
                    gf = min(max(gates[2 * hid + k] + p[2 * hid + k] * cp, -clip), clip)
                    fg = _sigmoid(gf)
                gc = min(max(gates[3 * hid + k], -clip), clip)
                cn = fg * cp + i * np.tanh(gc)
                go = min(max(gates[hid + k] + p[hid + k] * cn, -clip), clip)
                h[b, k] = _sigmoid(go) * np.tanh(cn)
                c[b, k] = cn
                y[t, b, k] = h[b, k]


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
    """(Y (T, B, H), h_T (B, H), c_T (B, H)) of one direction; see the module docstring."""
    t_len, batch, g4 = xw.shape
    hid = g4 // 4
    assert r_centred.shape == (hid, g4) and r_scale.shape == (g4,) and p.shape == (3 * hid,)
    h = np.ascontiguousarray(h0, np.float32).copy()
    c = np.ascontiguousarray(c0, np.float32).copy()
    y = np.zeros((t_len, batch, hid), np.float32)
    cl = np.float32(np.inf if clip is None else clip)
    exact32 = hid * 255.0 * float(np.abs(r_centred).max(initial=0)) < 2.0**24
    acc_t = np.float32 if exact32 else np.float64
    _qlstm(
        np.ascontiguousarray(xw, np.float32), lens.astype(np.int64),
        np.ascontiguousarray(r_centred, dtype=acc_t), r_scale.astype(np.float32),
        h, c, p.astype(np.float32), cl, int(input_forget), y,
    )  # fmt: skip
    return y, h, c
