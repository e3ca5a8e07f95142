"""LSTM and GRU with constant weights: the per-node state made once by the `prepare`
hook (ops/registry.py) and a step loop without the general driver's per-call setup.

ops/rnn.py's `_run` rebuilds the activation closures, splits W/R/B, computes the
sequence-length masks and blends every state through np.where on each call: ~20
numpy calls around the two matmuls of a one-frame step. When the weights are graph
constants, the activations and clip are the defaults, there are no peepholes and no
sequence_lens (the streaming case: every batch entry runs all T steps), the loop here
does the same arithmetic in the same order on the same operands, so its results equal
the driver's bit for bit (tests/unit/ops/test_rnn_fast.py checks that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_DEFAULT_ACTS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh")}


@dataclass(frozen=True)
class Prepared:
    """W, R, B as planned (identity-checked at run time: a fed value takes the driver)
    and per direction (W^T, R^T or its gate blocks transposed, Wb, Rb) in the work type."""

    w: np.ndarray
    r: np.ndarray
    b: np.ndarray | None
    dirs: tuple[tuple[Any, ...], ...]


def _defaults(op_type: str, attrs: dict[str, Any]) -> bool:
    acts = attrs.get("activations")
    default = _DEFAULT_ACTS[op_type]
    if acts and tuple(a.lower() for a in acts) not in (default, default * 2):
        return False
    return attrs.get("clip") is None and not attrs.get("input_forget")


def prepare(op_type: str, consts: tuple[Any, ...], attrs: dict[str, Any]) -> Prepared | None:
    """The prepare hook's body for LSTM / GRU: None when the fast loop does not apply."""
    w, r = (*consts, None, None)[1:3]
    b = consts[3] if len(consts) > 3 else None
    if w is None or r is None or not _defaults(op_type, attrs):
        return None
    if w.dtype not in (np.float32, np.float64) or w.ndim != 3 or r.ndim != 3:
        return None
    work = w.dtype
    hid = r.shape[-1]
    dirs: list[tuple[Any, ...]] = []
    for d in range(w.shape[0]):
        rd = r[d].astype(work, copy=False)
        if b is None:
            # the driver's zeros(n_gates * hid) for both biases
            wb = rb = np.zeros(rd.shape[0], work)
        else:
            wb, rb = np.split(b[d].astype(work, copy=False), 2)
        # the same views the driver multiplies by (wd.T, r.T or r's gate blocks .T)
        wt = w[d].astype(work, copy=False).T
        if op_type == "LSTM":
            dirs.append((wt, rd.T, wb, rb))
        else:
            blocks = tuple(rd[k * hid : (k + 1) * hid].T for k in range(3))
            dirs.append((wt, blocks, wb, tuple(np.split(rb, 3))))
    return Prepared(w, r, b, tuple(dirs))


def prepare_gru(consts: tuple[Any, ...], attrs: dict[str, Any]) -> Prepared | None:
    """GRU's prepare hook."""
    return prepare("GRU", consts, attrs)


def prepare_lstm(consts: tuple[Any, ...], attrs: dict[str, Any]) -> Prepared | None:
    """LSTM's prepare hook."""
    return prepare("LSTM", consts, attrs)


def applies(
    prepared: Prepared | None,
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None,
    sequence_lens: np.ndarray | None,
    p: np.ndarray | None = None,
) -> bool:
    """Whether `run` stands in for the driver: the planned constant weights are the
    ones given (a fed W/R/B takes the driver), full-length sequences, no peepholes."""
    return (
        prepared is not None
        and sequence_lens is None
        and p is None
        and w is prepared.w
        and r is prepared.r
        and b is prepared.b
        and x.dtype == prepared.w.dtype
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))  # the driver's default f (rnn._ACTIVATIONS)


def _lstm_dir(xw: np.ndarray, h: np.ndarray, c: np.ndarray, rt: np.ndarray, rb: np.ndarray, y):
    hid = h.shape[1]
    for t in range(xw.shape[0]):
        gates = xw[t] + h @ rt + rb
        # i, o, f are the first three blocks (order i o f c): one sigmoid over them
        s = _sigmoid(gates[:, : 3 * hid])
        c = s[:, 2 * hid :] * c + s[:, :hid] * np.tanh(gates[:, 3 * hid :])
        h = s[:, hid : 2 * hid] * np.tanh(c)
        y[t] = h
    return h, c


def _gru_dir(xw, h, rts, rbs, y, linear_before_reset: int):
    hid = h.shape[1]
    (rz, rr, rh), (bz, br, bh) = rts, rbs
    for t in range(xw.shape[0]):
        xt = xw[t]
        z = _sigmoid(xt[:, :hid] + h @ rz + bz)
        r = _sigmoid(xt[:, hid : 2 * hid] + h @ rr + br)
        if linear_before_reset:
            hh = np.tanh(xt[:, 2 * hid :] + r * (h @ rh + bh))
        else:
            hh = np.tanh(xt[:, 2 * hid :] + (r * h) @ rh + bh)
        h = (1 - z) * hh + z * h
        y[t] = h
    return h


def run(
    op_type: str,
    prep: Prepared,
    x: np.ndarray,
    initial: list[np.ndarray | None],
    *,
    direction: str,
    layout: int,
    linear_before_reset: int = 0,
) -> tuple[np.ndarray, ...]:
    """(Y, Y_h[, Y_c]) as rnn._run gives them with the default activations, no clip,
    no peepholes and no sequence_lens."""
    out_dtype = x.dtype
    work = prep.w.dtype
    if layout:
        x = np.swapaxes(x, 0, 1)
        initial = [None if s is None else np.swapaxes(s, 0, 1) for s in initial]
    t_len, batch = x.shape[:2]
    ys, finals = [], []
    for d, (wt, rt, wb, rb) in enumerate(prep.dirs):
        hid = prep.r.shape[-1]
        xs = x[::-1] if direction == "reverse" or d == 1 else x
        xw = np.matmul(xs, wt) + wb
        states = [np.zeros((batch, hid), work) if s is None else s[d].astype(work) for s in initial]
        y = np.zeros((t_len, batch, hid), work)
        if op_type == "LSTM":
            states = list(_lstm_dir(xw, states[0], states[1], rt, rb, y))
        else:
            states = [_gru_dir(xw, states[0], rt, rb, y, linear_before_reset)]
        ys.append(y[::-1] if direction == "reverse" or d == 1 else y)
        finals.append(states)
    if len(ys) == 1:  # views with the D axis (np.stack costs more than the step)
        y_all, outs = ys[0][:, None], [f[None] for f in finals[0]]
    else:
        y_all = np.stack(ys, axis=1)  # (T, D, B, H)
        outs = [np.stack([f[k] for f in finals]) for k in range(len(initial))]  # (D, B, H)
    if layout:
        y_all = np.transpose(y_all, (2, 0, 1, 3))
        outs = [np.swapaxes(o, 0, 1) for o in outs]
    return tuple(np.ascontiguousarray(v).astype(out_dtype, copy=False) for v in (y_all, *outs))
