"""com.microsoft DynamicQuantizeLSTM (ContribOperators.md).

An ONNX LSTM (gates i o f c, peepholes i o f) whose W (D, I, 4H) and R (D, H, 4H) are
8-bit, stored transposed relative to LSTM's. Each matmul quantizes its float left
operand to uint8 as DynamicQuantizeLinear does (one scale over the whole operand):
X of all time steps in one product, then the hidden state once per step, as
onnxruntime's rnn_helpers ComputeGemm; weight scales may be per column (D, 4H), the
weight zero point is per tensor (its first element). onnxruntime with more than one
thread quantizes the hidden state per chunk of batch rows (uni_directional_lstm.cc,
batch_parallel_), so its results vary with its thread count; this follows its
single-thread result, the whole batch under one scale.

The node's prepare hook (ops/registry.py) builds, once per session, each direction's
packed input weight for the integer GEMM (quant_igemm.py) and its centred recurrent
weight (kernels/linalg/qlstm.py `recurrent_weight`); the two directions' recurrences
run on two threads.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from onnxexec.kernels.linalg.qlstm import qlstm_recurrence, recurrent_weight
from onnxexec.native.parallel import parallel_for
from onnxexec.ops.contrib import MS_DOMAIN
from onnxexec.ops.contrib.quant_igemm import PackedInt8, int8_matmul, weight_fits
from onnxexec.ops.contrib.quant_matmul import exact_int_matmul
from onnxexec.ops.quant import dynamic_quantize_linear
from onnxexec.ops.registry import op
from onnxexec.ops.rnn import clipper, reverse_valid, rnn_activations


def _zero(z: np.ndarray, n_dirs: int, d: int) -> int:
    """Direction d's weight zero point (per tensor: its first element)."""
    return int(np.asarray(z).reshape(n_dirs, -1)[d, 0])


class LstmState:
    """A DynamicQuantizeLSTM node's prepared weights, per direction: W[d] packed for the
    integer GEMM (None where it does not fit) and R[d] centred (`recurrent_weight`)."""

    __slots__ = ("packed", "r", "recurrent", "rz", "w", "wz")

    def __init__(self, w: np.ndarray, r: np.ndarray, wz: np.ndarray, rz: np.ndarray) -> None:
        self.w, self.r, self.wz, self.rz = w, r, wz, rz
        n = w.shape[0]
        zs = [np.array(_zero(wz, n, d), w.dtype) for d in range(n)]
        self.packed = [
            PackedInt8(w[d], zs[d]) if weight_fits(w[d], zs[d]) else None for d in range(n)
        ]
        self.recurrent = [recurrent_weight(r[d], _zero(rz, n, d)) for d in range(n)]

    def owns(self, w: np.ndarray, r: np.ndarray, wz: np.ndarray, rz: np.ndarray) -> bool:
        """Whether this call's weights and zero points are the ones prepared."""
        return w is self.w and r is self.r and wz is self.wz and rz is self.rz


def prepare_lstm(consts: tuple[Any, ...], attrs: dict[str, Any]) -> LstmState | None:
    """DynamicQuantizeLSTM's prepare hook: the state for constant W, R and zero points."""
    w, r, wz, rz = (consts[i] if len(consts) > i else None for i in (1, 2, 9, 11))
    if any(not isinstance(v, np.ndarray) for v in (w, r, wz, rz)) or w.ndim != 3:
        return None
    return LstmState(w, r, wz, rz)


def _qgemm(
    a: np.ndarray, w: np.ndarray, w_scale: np.ndarray, w_zero: int, pw: PackedInt8 | None = None
) -> np.ndarray:
    """float32 A (M, K) @ 8-bit W (K, N): A quantized to uint8 over all of it; pw: W
    packed for the integer GEMM."""
    qa, sa, za = dynamic_quantize_linear(np.ascontiguousarray(a, np.float32))
    zw = np.array(w_zero, w.dtype)
    if pw is None and weight_fits(w, zw):
        pw = PackedInt8(w, zw)
    if pw is not None:  # float32(exact sum) * (sa * ws) + 0, as the float path below
        return int8_matmul(qa, pw, za, np.float32(sa) * w_scale)
    return _qgemm_float(a, w, w_scale, w_zero)


def _qgemm_float(a: np.ndarray, w: np.ndarray, w_scale: np.ndarray, w_zero: int) -> np.ndarray:
    """`_qgemm` through float32 BLAS (exact_int_matmul): the reference's product,
    independent of the integer GEMM the kernel uses."""
    qa, sa, za = dynamic_quantize_linear(np.ascontiguousarray(a, np.float32))
    acc = exact_int_matmul(qa, w, za, np.array(w_zero, w.dtype))
    return acc * (np.float32(sa) * w_scale)


def recurrence_reference(
    xw: np.ndarray,
    lens: np.ndarray,
    r: np.ndarray,
    rs: np.ndarray,
    rz: int,
    h0: np.ndarray,
    c0: np.ndarray,
    p: np.ndarray,
    cell: tuple[list[Callable[[np.ndarray], np.ndarray]], Callable, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One direction's steps in numpy, any activations: (Y (T, B, H), h_T, c_T).

    xw (T, B, 4H) holds X W + the biases; r (H, 4H) 8-bit; cell = ((f, g, h), clip,
    input_forget). kernels/linalg/qlstm.py is this for the default activations."""
    (f, g, h), clipf, input_forget = cell
    t_len, batch, _ = xw.shape
    pi, po, pf = np.split(p, 3)
    hprev, cprev = h0, c0
    y = np.zeros((t_len, batch, h0.shape[1]), np.float32)
    for t in range(t_len):
        # rows whose sequence ended feed zeros (onnxruntime reads them from the
        # zero-filled Y), which matters as they share the step's quantization range
        h_in = hprev if t == 0 else np.where((t - 1 < lens)[:, None], hprev, 0)
        gates = xw[t] + _qgemm_float(h_in, r, rs, rz)
        gi, go, gf, gc = np.split(gates, 4, axis=1)
        i = f(clipf(gi + pi * cprev))
        fg = 1 - i if input_forget else f(clipf(gf + pf * cprev))
        c = fg * cprev + i * g(clipf(gc))
        o = f(clipf(go + po * c))
        live = (t < lens)[:, None]
        hprev = np.where(live, o * h(c), hprev).astype(np.float32)
        cprev = np.where(live, c, cprev).astype(np.float32)
        y[t] = np.where(live, hprev, 0)
    return y, hprev, cprev


@op("DynamicQuantizeLSTM", since=1, domain=MS_DOMAIN, prepare=prepare_lstm)
def dynamic_quantize_lstm(
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None,
    sequence_lens: np.ndarray | None,
    initial_h: np.ndarray | None,
    initial_c: np.ndarray | None,
    p: np.ndarray | None,
    w_scale: np.ndarray,
    w_zero_point: np.ndarray,
    r_scale: np.ndarray,
    r_zero_point: np.ndarray,
    *,
    activation_alpha: tuple[float, ...] | None = None,
    activation_beta: tuple[float, ...] | None = None,
    activations: tuple[str, ...] | None = None,
    clip: float | None = None,
    direction: str = "forward",
    hidden_size: int | None = None,
    input_forget: int = 0,
    prepared: LstmState | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (T, B, I) f32 -> Y (T, D, B, H), Y_h (D, B, H), Y_c (D, B, H)."""
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ValueError(f"DynamicQuantizeLSTM: unknown direction '{direction}'")
    n_dirs = 2 if direction == "bidirectional" else 1
    acts = rnn_activations(
        activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh", "Tanh"), n_dirs
    )
    clipf = clipper(clip)
    names = [a.lower() for a in activations or ()]
    default_acts = (
        not activation_alpha
        and not activation_beta
        and (not names or names == ["sigmoid", "tanh", "tanh"] * n_dirs)
    )
    t_len, batch, _ = x.shape
    hid = hidden_size or r.shape[1]
    lens = (
        np.full(batch, t_len, np.int64) if sequence_lens is None else sequence_lens.astype(np.int64)
    )
    st = (
        prepared
        if prepared is not None and prepared.owns(w, r, w_zero_point, r_zero_point)
        else None
    )
    outs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    jobs: list[Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
    for d in range(n_dirs):
        ws = np.asarray(w_scale, np.float32).reshape(n_dirs, -1)[d]
        rs = np.asarray(r_scale, np.float32).reshape(n_dirs, -1)[d]
        wz = _zero(w_zero_point, n_dirs, d)
        rz = _zero(r_zero_point, n_dirs, d)
        wb, rb = (np.zeros(4 * hid, np.float32),) * 2 if b is None else np.split(b[d], 2)
        reverse = direction == "reverse" or d == 1
        xs = reverse_valid(x, lens) if reverse else x
        pw = st.packed[d] if st is not None else None
        xw = _qgemm(xs.reshape(t_len * batch, -1), w[d], ws, wz, pw).reshape(t_len, batch, -1)
        xw += wb + rb
        h0 = np.zeros((batch, hid), np.float32) if initial_h is None else initial_h[d]
        c0 = np.zeros((batch, hid), np.float32) if initial_c is None else initial_c[d]
        pd = np.zeros(3 * hid, np.float32) if p is None else p[d].astype(np.float32)
        if default_acts:
            r_c = st.recurrent[d] if st is not None else recurrent_weight(r[d], rz)
            rs_c = np.broadcast_to(rs, (4 * hid,))
            args = (xw, lens, r_c, rs_c, h0, c0, pd, clip, input_forget)
            jobs.append(partial(qlstm_recurrence, *args))
        else:
            cell = (acts[d], clipf, input_forget)
            outs.append(recurrence_reference(xw, lens, r[d], rs, rz, h0, c0, pd, cell))
    if jobs:  # the directions are independent: one thread each (the kernel drops the GIL)
        done: list[Any] = [None] * len(jobs)

        def run(i0: int, i1: int) -> None:
            for i in range(i0, i1):
                done[i] = jobs[i]()

        parallel_for(run, len(jobs), spans=len(jobs))
        outs = done
    ys, hs, cs = [], [], []
    for d, (y, hprev, cprev) in enumerate(outs):
        reverse = direction == "reverse" or d == 1
        ys.append(reverse_valid(y, lens) if reverse else y)
        hs.append(hprev)
        cs.append(cprev)
    return np.stack(ys, axis=1), np.stack(hs), np.stack(cs)
